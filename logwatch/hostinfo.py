"""Who is watching: this host's name and the run the environment names (SLURM, Kubernetes, W&B)."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

RUN_ENV = ("SLURM_JOB_ID", "POD_NAME", "WANDB_RUN_ID")
"""Variables that name the run, in the order they are asked; a Kubernetes pod's HOSTNAME comes
after POD_NAME (only inside a pod: KUBERNETES_SERVICE_HOST is set there)."""


def host_name() -> str:
    """This host's name, as alerts label it."""
    return socket.gethostname()


def environment_run(env: Mapping[str, str] | None = None) -> str | None:
    """The run id the environment names: SLURM_JOB_ID, the pod name, WANDB_RUN_ID, else None."""
    env = os.environ if env is None else env
    for name in RUN_ENV[:2]:
        if env.get(name):
            return env[name]
    if env.get("KUBERNETES_SERVICE_HOST") and env.get("HOSTNAME"):
        return env["HOSTNAME"]
    return env.get(RUN_ENV[2]) or None
