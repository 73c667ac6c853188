"""``blackjack loadtest``: the command handler under load on a real broker, and a proof that
nothing was lost or done twice.

One run, in its own fresh topics (a random prefix, deleted at the end):

1. **ours** -- a real ``CommandHandler`` (in this process) and ``--tables`` single-player
   tables played concurrently, ``--rounds`` rounds each, with the variant's basic strategy,
   through one shared ``BlackjackClient``. Each table is one player: it sends a command, waits
   for its result, waits until it has read the command's events (the table as the player sees
   it, folded with the real ``evolve``) and only then picks its next move, so at most one
   command per table is in flight, as from a real client. The tables' set-up (open, sit,
   deposit) is played first and not measured.
2. **baseline** -- the floor the same broker allows: a bare aiokafka transactional
   consume->produce loop (``read_committed`` consumer in a group, transactional producer, one
   transaction per fetched batch with ``send_offsets_to_transaction``, no decision) that
   answers every command with a message of the same size on a results topic, shaped as a
   ``CommandResult`` so the same client reads it. The same number of concurrent clients send
   exactly the commands each table sent in (1), one at a time, through the same client code.
3. **proof** -- read back from offset 0 (``read_committed``): the commands topic holds each
   command sent exactly once; the results topic holds exactly one result per command and none
   for any other id; no command was rejected; each table's events have sequences 1..n with
   unique ids, each accepted result's range is exactly the events its command caused, and
   folding them with ``evolve`` gives the state the handler holds in memory at the end (and
   the state the player saw); money is conserved per table: deposits = balance + what the
   house won, with the house result counted twice, from the stakes and payouts and from the
   rounds' settlements.

Speed is reported as the ratio ours/baseline measured in the same run (commands per second,
and the p50 command->result latency), since an absolute figure on a shared machine says
little. Every line printed is one JSON object with a ``kind``: ``setup``, ``run``,
``baseline``, ``proof``, ``summary``.
"""
