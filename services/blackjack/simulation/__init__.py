"""Monte Carlo play of the real decider under basic strategy."""
