"""What the tests share, in one place (fixtures live in tests/conftest.py, one per concern).

- `paths`: the repository root, the samples folder, the bundled logs the tests name.
- `samples`: the annotated sample logs and the alerts their `logwatch test` files expect.
- `process`: a `logwatch` command in a subprocess, its output collected as it comes.
- `tailkit`: a tail driver on a temp folder with a fake clock that records what it evaluates.
- `slackhelp`: alerts, an outbox and a `logwatch tail` process for the Slack tests.
- `corpus`, `golden`: the seeded log corpus and the byte-identical replay goldens
  (`python tests/support/golden.py --write` regenerates them).
- `together`: many small unrelated logs replayed in one call, each file's events apart (what
  each alone gives, at one replay's fixed cost).
- `properties`: the Hypothesis profiles (`dev` by default, `deep`) and `examples(N)`, a
  property's example count scaled to the profile.
- `framing_reference`, `stateful_reference`: the logic before the fast paths, as the reference
  the property tests and benchmarks compare with.
"""
