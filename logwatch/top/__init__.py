"""`logwatch top`: the health of every followed run at a glance (facts, view, keys, wiring)."""
