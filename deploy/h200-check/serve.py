"""Start vLLM on the H200 exactly as the shipped unit and profile say (issue 23).

    python3 deploy/h200-check/serve.py MODEL_DIR [--print]

The command is the one ``deploy/systemd/reviewbot-vllm@.service`` runs for the profile
``deploy/vllm/h200-qwen3.5-35b-a3b-fp8.env`` (read the way systemd reads them, with the test
suite's reader ``tests/deploy_files.py``), its ``Environment=`` lines included, with only these
changes, each needed on a machine with no network and no weights:

- the program: ``python3 -m vllm.entrypoints.cli.main serve`` (vLLM from the kit on
  PYTHONPATH, not /opt/reviewbot/.venv);
- the model: MODEL_DIR (``model_dir.py``) served under the profile's name
  (``--served-model-name``), weights from ``--load-format dummy``;
- the real-vLLM tier's scripted model (``--logits-processors``), so the answers are reviews, and
  its template's content format (``--chat-template-content-format string``);
- FlashInfer is not in the kit: ``VLLM_USE_FLASHINFER_SAMPLER=0`` and
  ``--gdn-prefill-backend triton``; the machine has no network: ``HF_HUB_OFFLINE=1``;
- cache directories under /tmp (the unit's /var/cache paths need its CacheDirectory=).

``--print``: print the command and the environment it adds, as JSON, and start nothing.

Owns: that command. Must not: wait for the server (run.sh does) or change the profile's flags.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPOSITORY))

from tests.deploy_files import SYSTEMD, VLLM, expand_command, read_env_file, read_unit  # noqa: E402

PROFILE = VLLM / "h200-qwen3.5-35b-a3b-fp8.env"
UNIT = SYSTEMD / "reviewbot-vllm@.service"
SHIPPED_PROGRAM = ["/opt/reviewbot/.venv/bin/vllm", "serve"]
PROGRAM = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve"]
LOGITS_PROCESSOR = "tests.realvllm.logits_processor:ScriptedModel"
CACHE_ROOT = Path("/tmp/h200-cache")
# No FlashInfer in the kit; no network on the machine (never ask the Hub for anything).
MACHINE_ENVIRONMENT = {
    "VLLM_USE_FLASHINFER_SAMPLER": "0",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def unit_environment() -> dict[str, str]:
    """The unit's Environment= lines, cache paths moved under CACHE_ROOT."""
    values = {}
    for line in read_unit(UNIT)["Service"].get("Environment", []):
        key, _, value = line.partition("=")
        if value.startswith("/var/cache/"):
            value = str(CACHE_ROOT / value.removeprefix("/var/cache/"))
        values[key] = value
    return values


def command(model_dir: Path) -> list[str]:
    profile = read_env_file(PROFILE)
    [exec_start] = read_unit(UNIT)["Service"]["ExecStart"]
    argv = expand_command(exec_start, profile)
    if argv[: len(SHIPPED_PROGRAM)] != SHIPPED_PROGRAM:
        raise SystemExit(f"the unit no longer starts {' '.join(SHIPPED_PROGRAM)}: {argv[:3]}")
    model = argv[len(SHIPPED_PROGRAM)]
    rest = argv[len(SHIPPED_PROGRAM) + 1 :]
    return [
        *PROGRAM,
        str(model_dir),
        "--served-model-name",
        model,
        *rest,
        "--load-format",
        "dummy",
        "--logits-processors",
        LOGITS_PROCESSOR,
        "--chat-template-content-format",
        "string",
        "--gdn-prefill-backend",
        "triton",
    ]


def main(argv: list[str]) -> int:
    if not argv or len(argv) > 2 or (len(argv) == 2 and argv[1] != "--print"):
        print("usage: serve.py MODEL_DIR [--print]", file=sys.stderr)
        return 2
    added = {**unit_environment(), **MACHINE_ENVIRONMENT}
    full = command(Path(argv[0]))
    if len(argv) == 2:
        print(json.dumps({"argv": full, "environment": added}, indent=2))
        return 0
    env = {**os.environ, **added}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(REPOSITORY)]))
    os.execvpe(full[0], full, env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
