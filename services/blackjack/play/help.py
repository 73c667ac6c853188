"""What the player types, as ``?`` shows it, the session's start and ``blackjack play
--help``: a module of its own, without imports, so that building the command line's parser
(every ``blackjack`` command) does not import the game's models to say it."""

HELP_WIDTH = 78
"""The columns the help fits in: an 80-column terminal's, and a pipe's (rich and argparse take
80 columns when there is no terminal), a column to spare each side. Lines of up to 95
columns were wrapped at column 0 in the middle of the moves' table."""

HELP = """\
  bet 5 [box N]   PlaceBet: 5 is 5.00 USD (500 cents), in the table's currency
  remove [5] [box N]  RemoveBet: chips back from a box before the deal (all of
                  them without an amount)
  rebet, rebet2   Rebet: the last round's bets, or twice them (rebet3, rebet4
                  where a table offers them)
  clear           ClearBets        deal       Deal       pass        Pass
  h / hit         Hit              s / stand  Stand      d / double  Double
  p / split       Split            r / surrender         Surrender
  i / insure      TakeInsurance    n / no     DeclineInsurance
                  (on your first box still offered insurance; where the rules
                  say so, a move on the hand declines it too)
  deposit 100     Deposit          withdraw 20           Withdraw
  sit 1           SitDown at seat 1
  seat 2          MoveSeat (a shared table, between rounds)
  leave           LeaveTable: cash out (a shared table: to your wallet)
  buyin 50        BuyIn from your wallet (a shared table is funded from it)
  history         your last rounds: id, time, hands, wagered, paid, balance
  rules           this table's rules and their theoretical return to player
  ?  help         q / quit"""
"""The moves (the table's commands they send), in columns."""
