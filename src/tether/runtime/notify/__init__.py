"""Notifications to people: a wait opened, answered or expired, a run that asked something
ended (docs/notify-people.md).

Which channels hear of which workflows is configuration (`channels`, `routes`); the rows to
deliver are written by the database in the transaction that changes the run (the outbox,
storage/outbox.py); a sender in each serve and worker process delivers them (`sender`), as a
signed webhook, a Slack message or an email (`transports`, `messages`, `signing`). Links
in a message come from one seam (`links`). Part of the runtime: it imports no surface.
"""
