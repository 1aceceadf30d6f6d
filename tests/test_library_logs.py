"""slack_sdk's log records go through logwatch's handler as DEBUG: shown only with --verbose,
never as `ERROR slack_sdk...` with Slack's HTML error page in a normal run."""

from __future__ import annotations

import io
import logging

import pytest

from logwatch.redact import install_log_handler, remove_log_handler


@pytest.mark.parametrize("verbose", [False, True])
def test_slack_sdk_errors_are_debug_lines_shown_only_when_verbose(verbose: bool) -> None:
    """Without --verbose: slack_sdk's ERROR is not shown, logwatch's own WARNING is; with it:
    slack_sdk's record is shown as DEBUG."""
    out = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = install_log_handler(out, verbose=verbose)
    try:
        logging.getLogger("slack_sdk.web.base_client").error(
            "Failed to decode Slack API response: <html>502 Bad Gateway</html>"
        )
        logging.getLogger("logwatch.slack").warning("chat.update failed (x); posting it anew")
    finally:
        remove_log_handler(handler)
        root.setLevel(level)
    lines = out.getvalue().splitlines()
    own = "WARNING logwatch.slack: chat.update failed (x); posting it anew"
    if verbose:
        assert lines == [
            "DEBUG slack_sdk.web.base_client: Failed to decode Slack API response: "
            "<html>502 Bad Gateway</html>",
            own,
        ]
    else:
        assert lines == [own]
