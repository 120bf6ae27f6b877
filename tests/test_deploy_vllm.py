"""The model server's deploy files: launch profiles fit (by the planner), units pass
``systemd-analyze verify``, nginx accepts its config, the health counter and the warm-up work.

``systemd-analyze verify`` checks that every Exec program exists, and the units name the
install paths (/opt/reviewbot/...). The test verifies copies whose paths point at this
checkout's scripts and this venv's real ``reviewbot``; ``vllm`` is not installed for tests
(it is the optional ``serve`` extra), so a stub stands in for that one program: its path is
checked, vLLM's own options are not.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reviewbot.config import Settings
from reviewbot.ops.capacity import LaunchSettings, plan_capacity
from reviewbot.ops.doctor_probes import DoctorTimeouts, group_deadline_s
from reviewbot.ops.gpus import find_gpu
from reviewbot.ops.model_shape import shipped_model
from reviewbot.ops.router import router_plan
from tests.deploy_files import (
    NGINX,
    ROOT,
    SYSTEMD,
    VLLM,
    NginxBlock,
    expand_command,
    nginx_seconds,
    nginx_size,
    read_env_file,
    read_nginx,
    read_unit,
)
from tests.fakes.vllm_server import FakeVLLM

PROFILES = sorted(VLLM.glob("*.env"))
ROUTER = ROOT / "deploy" / "vllm-router"
ROUTER_UNIT = ROUTER / "reviewbot-vllm-router.service"
ROUTER_PROFILE = ROUTER / "router.env"
UNITS = sorted([*SYSTEMD.glob("*.service"), *SYSTEMD.glob("*.timer"), ROUTER_UNIT])
VLLM_UNIT = SYSTEMD / "reviewbot-vllm@.service"
# The profile the router's example pool is made of (router.env's comment says which).
ROUTER_BOX_PROFILE = VLLM / "t10x4-qwen3.5-35b-a3b-gptq-int4.env"
# Every reviewbot model server needs these, whatever the hardware (see docs/capacity.md).
REQUIRED_FLAGS = (
    ("--enable-prefix-caching",),
    ("--enable-auto-tool-choice",),
    ("--tool-call-parser", "qwen3_coder"),
    ("--reasoning-parser", "qwen3"),
    ("--enable-prompt-tokens-details",),
    ("--generation-config", "vllm"),
    ("--scheduling-policy", "priority"),
)
# deploy/nginx/reviewbot.conf: the upstreams (vLLM, `reviewbot serve`) and the rate-limit zones,
# both keyed by the sender's address (per client; for the webhook, per GitLab instance).
MODEL_UPSTREAM = "reviewbot_model"
WEBHOOK_UPSTREAM = "reviewbot_webhook"
MODEL_ZONE = "reviewbot_model"
# deploy/vllm-router/nginx-router.conf: the model API of several boxes, through the router.
ROUTER_NGINX = ROUTER / "nginx-router.conf"
# (config, the upstream of its model API, that API's rate-limit zone)
MODEL_APIS = [
    (NGINX / "reviewbot.conf", MODEL_UPSTREAM, MODEL_ZONE),
    (ROUTER_NGINX, "reviewbot_router", "reviewbot_router"),
]
WEBHOOK_ZONE = "reviewbot_webhook"
PER_CLIENT_KEY = "$binary_remote_addr"
CHAT_URI = "/v1/chat/completions"  # what reviews and the load test stream
WEBHOOK_URI = "/webhook/gitlab"
# What reviewbot asks vLLM for (the doctor and the load test too).
VLLM_URIS = (CHAT_URI, "/v1/models", "/tokenize", "/metrics", "/health")
# A non-streamed answer sends nothing until it is complete, so nginx must wait for the longest
# generation: a whole context of the largest profile at the slowest decode rate the deploy plans
# for (a slow GPU under load, deploy/nginx/reviewbot.conf's comment on the /v1/ timeouts).
SLOWEST_DECODE_TOKENS_PER_S = 20
LONGEST_GENERATION_S = (
    max(int(read_env_file(p)["PROFILE_MAX_MODEL_LEN"]) for p in PROFILES)
    / SLOWEST_DECODE_TOKENS_PER_S
)
HEALTH_SCRIPT = VLLM / "health-check.sh"
UNIT_SECTIONS = ("Unit", "Service", "Install")
RESTART_REQUESTED = 75


def test_the_three_profiles_of_the_issue_exist() -> None:
    names = {p.stem for p in PROFILES}
    assert {"t10x4-qwen3.5-35b-a3b-gptq-int4", "h200-qwen3.5-35b-a3b-fp8"} <= names
    assert any(name.startswith("24gb-qwen3.5-") for name in names)


def _served_command(profile: Path) -> list[str]:
    env = read_env_file(profile)
    [command] = read_unit(VLLM_UNIT)["Service"]["ExecStart"]
    return expand_command(command, env)


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_profile_fits_by_the_planner(profile: Path) -> None:
    env = read_env_file(profile)
    argv = _served_command(profile)
    quantization = env["PROFILE_QUANTIZATION"]
    if quantization == "fp8" and "fp8" not in env["PROFILE_MODEL"].lower():
        assert _option(argv, "--quantization") == "fp8"
    plan = plan_capacity(
        shipped_model(env["PROFILE_MODEL"]),
        find_gpu(env["PROFILE_GPU"]),
        LaunchSettings(
            gpus=int(env["PROFILE_GPUS"]),
            tensor_parallel_size=int(_option(argv, "--tensor-parallel-size")),
            quantization=quantization,
            max_model_len=int(_option(argv, "--max-model-len")),
            kv_cache_dtype=_option(argv, "--kv-cache-dtype"),
            gpu_memory_utilization=float(_option(argv, "--gpu-memory-utilization")),
            max_num_batched_tokens=int(_option(argv, "--max-num-batched-tokens")),
            max_num_seqs=int(_option(argv, "--max-num-seqs")),
        ),
    )
    assert plan.fits, plan.warnings
    assert int(_option(argv, "--max-num-seqs")) <= plan.max_sequences_at_max_model_len
    assert _option(argv, "--dtype") == plan.recommended.dtype
    assert not [w for w in plan.warnings if "refuses" in w], plan.warnings


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_profile_serves_what_reviewbot_needs(profile: Path) -> None:
    argv = _served_command(profile)
    assert argv[1:3] == ["serve", read_env_file(profile)["PROFILE_MODEL"]]
    for flag in REQUIRED_FLAGS:
        at = argv.index(flag[0])
        assert tuple(argv[at : at + len(flag)]) == flag
    assert _option(argv, "--host") == "127.0.0.1"


def test_24gb_profile_serves_64k_with_four_sequences_on_every_24gb_card() -> None:
    [profile] = [p for p in PROFILES if p.stem.startswith("24gb-")]
    env = read_env_file(profile)
    assert int(env["PROFILE_MAX_MODEL_LEN"]) == 65536
    assert int(env["PROFILE_MAX_NUM_SEQS"]) >= 4
    for gpu in ("RTX3090", "RTX4090", "L4", "A10"):
        plan = plan_capacity(
            shipped_model(env["PROFILE_MODEL"]),
            find_gpu(gpu),
            LaunchSettings(
                quantization=env["PROFILE_QUANTIZATION"],
                max_model_len=65536,
                max_num_batched_tokens=int(env["PROFILE_MAX_NUM_BATCHED_TOKENS"]),
                max_num_seqs=4,
            ),
        )
        assert plan.max_sequences_at_max_model_len >= 4, gpu


@pytest.mark.parametrize("model", ["Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-35B-A3B"])
def test_every_larger_qwen35_model_falls_short_of_four_64k_sequences_on_some_24gb_card(
    model: str,
) -> None:
    """Why the 24 GB profile serves the 9B: the next larger models, even as GPTQ-Int4 with an
    fp8 KV cache and the smaller prefill step, do not hold 4 sequences of 64K on every card."""
    fewest = min(
        plan_capacity(
            shipped_model(model),
            find_gpu(gpu),
            LaunchSettings(
                quantization="gptq-int4",
                max_model_len=65536,
                kv_cache_dtype="fp8",
                max_num_batched_tokens=4096,
                max_num_seqs=4,
            ),
        ).max_sequences_at_max_model_len
        for gpu in ("RTX3090", "RTX4090", "L4", "A10")
    )
    assert fewest < 4


def test_t10_profile_runs_on_turing() -> None:
    argv = _served_command(VLLM / "t10x4-qwen3.5-35b-a3b-gptq-int4.env")
    assert _option(argv, "--dtype") == "float16"  # no bfloat16 on sm75
    assert _option(argv, "--attention-backend") == "TRITON_ATTN"  # FlashAttention needs sm80
    assert _option(argv, "--tensor-parallel-size") == "4"


# --- systemd ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def verifiable_units(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Copies of the units with install paths pointing at this checkout and venv."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    root = tmp_path_factory.mktemp("units")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "reviewbot").symlink_to(Path(sys.executable).parent / "reviewbot")
    for program in ("vllm", "vllm-router"):
        stub = bin_dir / program
        stub.write_text("#!/bin/sh\nexit 0\n")
        stub.chmod(0o755)
    for unit in UNITS:
        text = unit.read_text().replace("/opt/reviewbot/.venv/bin/", f"{bin_dir}/")
        (root / unit.name).write_text(text.replace("/opt/reviewbot/deploy/", f"{ROOT}/deploy/"))
    for profile in PROFILES:  # one instance of the template per profile
        text = (root / VLLM_UNIT.name).read_text()
        (root / f"reviewbot-vllm@{profile.stem}.service").write_text(text)
    return root


@pytest.mark.parametrize(
    "unit",
    [*UNITS, *(Path(f"reviewbot-vllm@{p.stem}.service") for p in PROFILES)],
    ids=lambda p: p.name,
)
def test_systemd_analyze_verify(verifiable_units: Path, unit: Path) -> None:
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", f"./{unit.name}"],
        cwd=verifiable_units,
        capture_output=True,
        text=True,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0"},
    )
    # verify exits 0 on unknown keys and bad values but says so: no output is the bar.
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_vllm_unit_settings() -> None:
    unit = read_unit(VLLM_UNIT)
    service = unit["Service"]
    assert service["Restart"] == ["on-failure"]
    assert service["MemoryMax"]
    assert any(e.startswith("PYTORCH_CUDA_ALLOC_CONF=") for e in service["Environment"])
    # the profile, then the optional API key (VLLM_API_KEY: in the environment, not the argv)
    assert service["EnvironmentFile"] == [
        "/etc/reviewbot/vllm/%i.env",
        "-/etc/reviewbot/vllm/api-key.env",
    ]
    assert "--api-key" not in service["ExecStart"][0]
    assert service["ExecStartPost"] == ["/opt/reviewbot/deploy/vllm/warmup.sh"]


def _unexplained_settings(unit: Path) -> list[str]:
    """Directive lines of [Unit], [Service] and [Install] with no comment saying why.

    A directive is explained when the line above it is a comment, or when it follows other
    directives of a comment that names it: its key, or for Environment= the variable. (systemd
    has no comments at the end of a line: a ``#`` there is part of the value.)"""
    unexplained: list[str] = []
    section, comment, previous, continued = "", "", "", False
    for raw in unit.read_text().splitlines():
        line = raw.strip()
        if continued:  # the next line of a directive ending in a backslash
            continued = line.endswith("\\")
            continue
        if line.startswith(("#", ";")):
            comment = (comment if previous == "comment" else "") + " " + line
            previous = "comment"
            continue
        if not line or line.startswith("["):
            section = line.strip("[]") if line else section
            comment, previous = "", ""
            continue
        key, _, value = line.partition("=")
        name = value.partition("=")[0] if key == "Environment" else key
        named = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", comment)
        if section in UNIT_SECTIONS and previous != "comment" and not named:
            unexplained.append(line)
        previous, continued = "directive", line.endswith("\\")
    return unexplained


def test_every_vllm_unit_setting_says_why() -> None:
    assert _unexplained_settings(VLLM_UNIT) == []


def test_every_router_unit_setting_says_why() -> None:
    assert _unexplained_settings(ROUTER_UNIT) == []


def _flag_values(argv: list[str]) -> dict[str, list[str]]:
    """``--flag value value`` -> {flag: [values]}, the last of a repeated flag kept."""
    flags: dict[str, list[str]] = {}
    current = ""
    for word in argv:
        if word.startswith("--"):
            current = word
            flags[current] = []
        elif current:
            flags[current].append(word)
    return flags


def test_router_profile_is_what_capacity_prints_for_its_pool() -> None:
    """The unit's flags with router.env are ``capacity --replicas 3``'s for three boxes of the
    T10 profile: the pool's in-flight limit, the queue, the health check, the breaker."""
    env = read_env_file(ROUTER_PROFILE)
    [command] = read_unit(ROUTER_UNIT)["Service"]["ExecStart"]
    argv = expand_command(command, env)
    urls = env["ROUTER_WORKER_URLS"].split()
    per_box = int(read_env_file(ROUTER_BOX_PROFILE)["PROFILE_MAX_NUM_SEQS"])
    plan = router_plan(len(urls), per_box, urls)
    assert argv[0] == "/opt/reviewbot/.venv/bin/vllm-router"
    assert _flag_values(argv[1:]) == _flag_values(shlex.split(" ".join(plan.flags)))
    assert plan.settings["REVIEWBOT_LLM_TOTAL_CONCURRENCY"] == env["ROUTER_MAX_CONCURRENT_REQUESTS"]


def test_router_timeout_outlasts_the_longest_generation() -> None:
    timeout = int(read_env_file(ROUTER_PROFILE)["ROUTER_REQUEST_TIMEOUT_SECS"])
    assert timeout >= LONGEST_GENERATION_S
    assert timeout > Settings().request_timeout_s  # reviewbot gives up and retries first


def test_nginx_router_api_passes_what_doctor_asks_the_router() -> None:
    server = _server_proxying_to(_nginx(ROUTER_NGINX), "reviewbot_router")
    for uri in ("/workers", "/readiness", *VLLM_URIS):
        assert _location_for(server, uri).own("proxy_pass") == [["http://reviewbot_router"]], uri


def test_health_timer_probes_every_30_seconds() -> None:
    timer = read_unit(SYSTEMD / "reviewbot-vllm-health.timer")["Timer"]
    assert timer["OnUnitActiveSec"] == ["30s"]
    service = read_unit(SYSTEMD / "reviewbot-vllm-health.service")["Service"]
    assert "HEALTH_FAILURES_BEFORE_RESTART=3" in service["Environment"]
    assert "doctor --model-only" in service["ExecStart"][0]


# --- health counter --------------------------------------------------------------------------


@pytest.fixture
def health_env(tmp_path: Path) -> dict[str, str]:
    """A fake systemctl that logs its calls and says the vLLM unit is active."""
    systemctl = tmp_path / "systemctl"
    systemctl.write_text(
        f'#!/bin/sh\necho "$@" >> {tmp_path}/systemctl.log\n'
        f'[ "$1" = is-active ] && exit "$(cat {tmp_path}/active 2>/dev/null || echo 0)"\nexit 0\n'
    )
    systemctl.chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    return {
        "PATH": os.environ["PATH"],
        "HEALTH_SYSTEMCTL": str(systemctl),
        "HEALTH_VLLM_UNIT": "reviewbot-vllm@test.service",
        "HEALTH_FAILURES_BEFORE_RESTART": "3",
        "STATE_DIRECTORY": str(state),
    }


def _probe(env: dict[str, str], healthy: bool) -> int:
    command = [str(HEALTH_SCRIPT), "probe", "true" if healthy else "false"]
    return subprocess.run(command, env=env, capture_output=True).returncode


def _after(env: dict[str, str], exit_status: int) -> None:
    subprocess.run(
        [str(HEALTH_SCRIPT), "after"],
        env={**env, "EXIT_STATUS": str(exit_status)},
        check=True,
        capture_output=True,
    )


def _restarts(env: dict[str, str]) -> int:
    log = Path(env["HEALTH_SYSTEMCTL"]).parent / "systemctl.log"
    return sum(line.startswith("restart ") for line in log.read_text().splitlines())


def test_health_restarts_vllm_at_the_third_failure_in_a_row(health_env: dict[str, str]) -> None:
    statuses = []
    for healthy in (False, False, True, False, False, False, False):
        status = _probe(health_env, healthy)
        statuses.append(status)
        _after(health_env, status)
    # the success in between resets the count; the 3rd failure in a row asks for a restart
    assert statuses == [1, 1, 0, 1, 1, RESTART_REQUESTED, 1]
    assert _restarts(health_env) == 1


@pytest.mark.slow
def test_a_hung_probe_counts_as_a_failure(health_env: dict[str, str]) -> None:
    """A probe that never ends is stopped by health-check.sh itself (before the unit's
    TimeoutStartSec would kill the script uncounted), and counts toward the restart."""
    env = {**health_env, "HEALTH_PROBE_TIMEOUT_S": "0.3"}
    statuses = []
    for _ in range(3):
        command = [str(HEALTH_SCRIPT), "probe", "sleep", "30"]
        status = subprocess.run(command, env=env, capture_output=True, timeout=20).returncode
        statuses.append(status)
        _after(env, status)
    assert statuses == [1, 1, RESTART_REQUESTED]
    assert _restarts(env) == 1


def test_a_probe_killed_from_outside_still_counts(health_env: dict[str, str]) -> None:
    counter = Path(health_env["STATE_DIRECTORY"]) / "consecutive-failures"
    command = [str(HEALTH_SCRIPT), "probe", "sleep", "30"]
    running = subprocess.Popen(command, env=health_env, start_new_session=True)
    deadline = time.monotonic() + 10
    while not (counter.exists() and counter.read_text().strip() == "1"):
        assert time.monotonic() < deadline, "the probe never counted itself"
        time.sleep(0.02)
    os.killpg(running.pid, signal.SIGKILL)  # as systemd does at TimeoutStartSec
    running.wait(10)
    assert counter.read_text().strip() == "1"
    assert _probe(health_env, healthy=False) == 1
    assert counter.read_text().strip() == "2"


def test_health_unit_gives_the_probe_more_time_than_the_script_does() -> None:
    service = read_unit(SYSTEMD / "reviewbot-vllm-health.service")["Service"]
    script = HEALTH_SCRIPT.read_text()
    limit = re.search(r"HEALTH_PROBE_TIMEOUT_S:-(\d+)", script)
    assert limit is not None
    assert int(limit[1]) < int(service["TimeoutStartSec"][0])


def test_the_health_script_gives_doctor_more_time_than_its_model_checks_take() -> None:
    """`doctor --model-only` with its default timeouts gives up on a stuck group before the
    script's `timeout` kills it (a killed probe says nothing of what was wrong)."""
    limit = re.search(r"HEALTH_PROBE_TIMEOUT_S:-(\d+)", HEALTH_SCRIPT.read_text())
    assert limit is not None
    assert group_deadline_s(DoctorTimeouts(), model_only=True) < int(limit[1])


def test_health_does_not_probe_a_starting_server(health_env: dict[str, str]) -> None:
    (Path(health_env["HEALTH_SYSTEMCTL"]).parent / "active").write_text("3")  # activating
    for _ in range(5):
        status = _probe(health_env, healthy=False)
        _after(health_env, status)
        assert status == 0
    assert _restarts(health_env) == 0


# --- warm-up ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("api_key", [None, "vllm-key-0123456789"], ids=["open", "api-key"])
def test_warmup_sends_one_tool_request_once_vllm_answers(api_key: str | None) -> None:
    """With VLLM_API_KEY (the unit's optional api-key.env) the warm-up sends it, as vLLM then
    wants it on /v1/."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    with FakeVLLM(api_key=api_key) as server:
        env = {
            "PATH": os.environ["PATH"],
            "WARMUP_BASE_URL": server.root_url,
            "PROFILE_MODEL": server.model,
            **({"VLLM_API_KEY": api_key} if api_key else {}),
        }
        result = subprocess.run(
            [str(VLLM / "warmup.sh")], env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        [request] = server.requests
    assert request["model"] == server.model
    assert request["tools"][0]["function"]["name"] == "report_finding"


# --- nginx -----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("conf", [NGINX / "reviewbot.conf", ROUTER_NGINX], ids=lambda p: p.name)
def test_nginx_accepts_the_config(tmp_path: Path, conf: Path) -> None:
    nginx = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )
    if nginx is None:
        pytest.skip("nginx is not installed (CI installs it: see .ci/run)")
    certificate, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=reviewbot.test",
            "-keyout",
            str(key),
            "-out",
            str(certificate),
        ],
        check=True,
        capture_output=True,
    )
    config = conf.read_text()
    config = config.replace("/etc/ssl/reviewbot/fullchain.pem", str(certificate))
    (tmp_path / "reviewbot.conf").write_text(
        config.replace("/etc/ssl/reviewbot/privkey.pem", str(key))
    )
    (tmp_path / "logs").mkdir()
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/logs/error.log;\nevents {{}}\n"
        f"http {{\n  access_log off;\n  include {tmp_path}/reviewbot.conf;\n}}\n"
    )
    result = subprocess.run(
        [nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def _nginx(conf: Path = NGINX / "reviewbot.conf") -> NginxBlock:
    return read_nginx(conf)


def _server_proxying_to(http: NginxBlock, upstream: str) -> NginxBlock:
    [server] = [
        server
        for server in http.children("server")
        if any(
            ["http://" + upstream] in location.own("proxy_pass")
            for location in server.children("location")
        )
    ]
    return server


def _location_for(server: NginxBlock, uri: str) -> NginxBlock:
    """The location nginx picks for ``uri``: an exact match; else the longest matching prefix if
    it is ``^~``; else the first regular expression that matches, in the order written; else
    that longest prefix."""
    prefixes: list[tuple[str, NginxBlock]] = []
    for location in server.children("location"):
        modifier, path = location.args if len(location.args) == 2 else ("", location.args[0])
        if modifier == "=" and path == uri:
            return location
        if modifier in ("", "^~") and uri.startswith(path):
            prefixes.append((path, location))
    longest = max(prefixes, key=lambda found: len(found[0]), default=None)
    if longest is not None and longest[1].args[0] == "^~":
        return longest[1]
    for location in server.children("location"):
        if location.args[0] in ("~", "~*"):
            flags = re.IGNORECASE if location.args[0] == "~*" else 0
            if re.search(location.args[1], uri, flags):
                return location
    assert longest is not None, f"no location for {uri}"
    return longest[1]


def _zone_of(location: NginxBlock) -> str:
    [[zone, *_]] = location.effective("limit_req")
    return zone.removeprefix("zone=")


def _zone_key(http: NginxBlock, zone: str) -> str:
    [key] = [
        key for key, name, *_ in http.own("limit_req_zone") if name.startswith(f"zone={zone}:")
    ]
    return key


def _access_rules(block: NginxBlock) -> list[tuple[str, str]]:
    """allow/deny as nginx applies them here: the innermost block that has any replaces all of
    its parents' (ngx_http_access_module merges the rule list as a whole)."""
    current: NginxBlock | None = block
    while current is not None:
        rules = [(name, args[0]) for name, args in current.directives if name in ("allow", "deny")]
        if rules:
            return rules
        current = current.parent
    return []


@pytest.mark.parametrize(("conf", "upstream", "zone"), MODEL_APIS, ids=["one-box", "router"])
def test_nginx_rate_limits_the_model_api_per_client(conf: Path, upstream: str, zone: str) -> None:
    http = _nginx(conf)
    chat = _location_for(_server_proxying_to(http, upstream), CHAT_URI)
    assert _zone_of(chat) == zone
    assert _zone_key(http, zone) == PER_CLIENT_KEY


@pytest.mark.parametrize(("conf", "upstream", "zone"), MODEL_APIS, ids=["one-box", "router"])
def test_nginx_model_timeouts_outlast_the_longest_generation(
    conf: Path, upstream: str, zone: str
) -> None:
    chat = _location_for(_server_proxying_to(_nginx(conf), upstream), CHAT_URI)
    for directive in ("proxy_read_timeout", "proxy_send_timeout"):
        [[value]] = chat.effective(directive)
        assert nginx_seconds(value) >= LONGEST_GENERATION_S, (directive, value)


@pytest.mark.parametrize(("conf", "upstream", "zone"), MODEL_APIS, ids=["one-box", "router"])
def test_nginx_streams_model_answers_unbuffered(conf: Path, upstream: str, zone: str) -> None:
    """Streamed chat answers pass unbuffered: a buffered stream reaches the client at its end,
    and the client's TTFT becomes the whole answer's time."""
    chat = _location_for(_server_proxying_to(_nginx(conf), upstream), CHAT_URI)
    assert chat.effective("proxy_buffering") == [["off"]]


def test_nginx_webhook_limits_match_reviewbot() -> None:
    http = _nginx()
    webhook = _location_for(_server_proxying_to(http, WEBHOOK_UPSTREAM), WEBHOOK_URI)
    assert webhook.own("proxy_pass") == [["http://" + WEBHOOK_UPSTREAM]]
    assert _zone_of(webhook) == WEBHOOK_ZONE
    assert _zone_key(http, WEBHOOK_ZONE) == PER_CLIENT_KEY  # the sender: one GitLab instance
    [[size]] = webhook.effective("client_max_body_size")
    assert nginx_size(size) == Settings().webhook_max_body_bytes


@pytest.mark.parametrize(("conf", "upstream", "zone"), MODEL_APIS, ids=["one-box", "router"])
def test_nginx_model_api_denies_everyone_not_allowed(conf: Path, upstream: str, zone: str) -> None:
    """Every location of the model API that reaches vLLM ends its access rules with deny all
    (vLLM's API key leaves /tokenize, /metrics and more open)."""
    server = _server_proxying_to(_nginx(conf), upstream)
    proxied = [location for location in server.children("location") if location.own("proxy_pass")]
    assert all(_location_for(server, uri) in proxied for uri in VLLM_URIS)
    for location in proxied:
        rules = _access_rules(location)
        assert rules and rules[-1] == ("deny", "all"), (location.args, rules)
        assert ("allow", "all") not in rules
        assert ("allow", "127.0.0.1") in rules
