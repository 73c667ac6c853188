"""How the handlers' consumer group deals the command partitions out (``assignors``).

Sticky first: a rebalance (a pod started, stopped, or killed and back within the session
timeout) leaves each handler the partitions it had wherever the balance allows, and a
partition given back to the handler that had it is taken without a rebuild when nothing was
written meanwhile (``takeover``). Round-robin, aiokafka's default, dealt the partitions out by
the members' ids, which are new at each start: a two-instance review saw a restarted pod come
back with the halves swapped, every partition rebuilt on both sides.

Round-robin second: a group agrees on a strategy every member offers, so during a rolling
upgrade the handlers of a release before this one (round-robin only) and this one's play on
round-robin, and switch to sticky once every member offers it.
"""

from __future__ import annotations

from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor


def assignors() -> tuple[type[AbstractPartitionAssignor], ...]:
    """The strategies one handler's consumer offers, in its order of preference.

    aiokafka's sticky assignor keeps the member's last assignment (what it tells the group it
    had) in class attributes: each consumer gets a subclass of its own, or two handlers in one
    process (the tests', a process restarting its handler) would tell each other's."""
    sticky = type(
        "HandlerStickyAssignor",
        (StickyPartitionAssignor,),
        {
            "member_assignment": None,
            "generation": StickyPartitionAssignor.DEFAULT_GENERATION_ID,
            "_latest_partition_movements": None,
        },
    )
    return (sticky, RoundRobinPartitionAssignor)
