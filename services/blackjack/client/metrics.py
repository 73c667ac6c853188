"""The client's counters. A platform's process that imports the client exports them with its
own metrics (its prometheus-client registry); the service's processes do not import the
client."""

from __future__ import annotations

from prometheus_client import Counter

RESULTS_RESETS = Counter(
    "blackjack_client_results_resets_total",
    "Times a BlackjackClient's results reader moved its position in the results topic, by "
    "cause: deleted (the records there were deleted before it read them: retention, "
    "delete_records; it reads on from the earliest still there), past_end (the partition now "
    "ends before it: its log truncated, or the topic recreated on a broker without topic ids; "
    "it reads on from a minute before the last answer it read there), recreated (the topic's "
    "id changed: deleted and made again; every partition read from its beginning), "
    "partition_removed (once per partition that no longer exists: no longer read)",
    ["client_id", "cause"],
)
RESULTS_DELETED_UNREAD = Counter(
    "blackjack_client_results_deleted_unread_total",
    "Offsets of the results topic deleted before a BlackjackClient's reader read them: each "
    "may have been an answer a caller waits for (its result() times out; resend it under the "
    "same command id and sent_at)",
    ["client_id"],
)
UNREADABLE_RESULTS = Counter(
    "blackjack_client_unreadable_results_total",
    "Records of the results topic a BlackjackClient could not read as a command result, by "
    "kind: named (its command id read: result() raises UnreadableResult) or nameless (no "
    "command id to read: logged only)",
    ["client_id", "kind"],
)
