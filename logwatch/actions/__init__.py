"""Acting on alerts: `[[action]]` commands run when an alert fires or resolves.

`spec` reads the config's `[[action]]` tables, `argv` fills their placeholders, `journal` keeps
what ran (at most once per alert, across restarts and kill -9), `process` runs one command
(no shell, a timeout, SIGTERM then SIGKILL), `sink` is the consumer of the lifecycle's events
that ties them together, `pids` follows each log's `run start:` pid, `plan` says what replay
(and the report) would have run, `checks` is what `logwatch doctor` checks of them.
"""
