"""The model service: the real llama.cpp server on the real packaged GGUF (the session's
`llm_server`), its reuse, the LLM profile, the node parameters it sets, and clear errors when a
server dies or stays silent (small stand-in executables, for those failure paths only)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml

from m3_agent.llm import profile as llm_profile
from m3_agent.llm.server import LlamaServer, ServerConfig, ServerError, free_port, served_models
from m3_agent.llm.service import check_endpoint, model_service

ROOT = Path(__file__).resolve().parents[1]


def write_profile(path: Path, **sections) -> Path:
    path.write_text(yaml.safe_dump(sections))
    return path


def chat(base_url: str, model: str, text: str, max_tokens: int = 16) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens, "temperature": 0}
    response = requests.post(f"{base_url}/chat/completions", json=body, timeout=120)
    response.raise_for_status()
    return response.json()


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie (exited, not yet reaped) is not running
        return stat.read().split()[2] != "Z"


def port_closed(base_url: str, timeout_s: float = 10.0) -> bool:
    """Nothing answers at base_url any more. The leader thread shows as a zombie while the server's other
    threads still exit, and one of them may yet accept and reset a connection: wait that out."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(ServerError):
            if served_models(base_url, timeout_s=1.0) is None:
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def test_real_server_answers_a_chat_completion(llm_server):
    assert llm_server.base_url.startswith("http://127.0.0.1:") and llm_server.base_url.endswith("/v1")
    assert served_models(llm_server.base_url) == [llm_server.model]
    reply = chat(llm_server.base_url, llm_server.model, "What is the capital of France? Answer with one word.")
    assert "paris" in reply["choices"][0]["message"]["content"].lower()
    assert reply["usage"]["completion_tokens"] > 0


def test_the_server_runs_with_one_core_left_to_the_nodes(llm_server):
    """The session's server was started from ServerConfig's defaults: llama.cpp's llama-server that
    set-up linked beside this interpreter, generation threads every core but one, prompt threads every
    core, one request at a time, the weights read rather than mapped (the flags the real server took)."""
    with open(f"/proc/{llm_server.pid}/cmdline", "rb") as cmdline:
        argv = cmdline.read().decode().split("\0")
    assert Path(argv[0]) == Path(sys.executable).parent / "llama-server"
    names = ("--threads", "--threads-batch", "--parallel", "--load-mode")
    flag = {name: argv[argv.index(name) + 1] for name in names}
    cores = os.cpu_count() or 1
    assert flag == {
        "--threads": str(max(1, cores - 1)),
        "--threads-batch": str(cores),
        "--parallel": "1",
        "--load-mode": "none",
    }
    assert chat(llm_server.base_url, llm_server.model, "Say OK.")["choices"][0]["message"]["content"]


def test_a_streamed_reply_is_not_cut_by_a_request_that_arrives_meanwhile(llm_server):
    """The reasoner streams its answer while the memorizer may send a clip: the real server finishes
    the stream (its last chunk gives a finish_reason) and then answers the second request (--parallel 1:
    requests queue). llama-cpp-python's server, used before, ended the stream with [DONE] mid-answer."""

    import threading

    body = {
        "model": llm_server.model,
        "messages": [{"role": "user", "content": "Count from 1 to 60, the numbers separated by spaces."}],
        "max_tokens": 48,
        "temperature": 0,
        "stream": True,
    }
    first_chunk, finish, text, second = threading.Event(), [], [], []

    def other_request() -> None:
        first_chunk.wait(120)
        second.append(chat(llm_server.base_url, llm_server.model, "Say OK.", max_tokens=4))

    other = threading.Thread(target=other_request)
    other.start()
    with requests.post(f"{llm_server.base_url}/chat/completions", json=body, stream=True, timeout=120) as response:
        for line in response.iter_lines():
            if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
                continue
            choice = json.loads(line[5:])["choices"][0]
            text.append((choice.get("delta") or {}).get("content") or "")
            finish.append(choice.get("finish_reason"))
            if len(text) == 2:
                first_chunk.set()  # the other request now waits for the model
                time.sleep(0.5)
    other.join(120)
    assert finish and finish[-1] in ("stop", "length"), ("".join(text), finish[-3:])
    assert len("".join(text).split()) >= 10
    assert second and second[0]["choices"][0]["message"]["content"]


def test_profile_thread_counts_reach_the_server_flags(tmp_path):
    from m3_agent.llm.service import server_config

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    config = server_config(llm_profile.EmbeddedSettings(model=str(gguf), threads=3, threads_batch=5))
    argv = config.argv()
    assert argv[argv.index("--threads") + 1] == "3" and argv[argv.index("--threads-batch") + 1] == "5"


def test_a_running_server_with_the_same_model_is_reused(llm_server):
    config = ServerConfig(model_path=Path("/unused.gguf"), model=llm_server.model, port=llm_server.config.port)
    with LlamaServer(config) as again:
        assert not again.owned and again.pid is None and again.base_url == llm_server.base_url
    assert served_models(llm_server.base_url) == [llm_server.model]  # leaving did not stop it


def test_a_port_serving_another_model_is_an_error(llm_server):
    config = ServerConfig(model_path=Path("/unused.gguf"), model="another-model", port=llm_server.config.port)
    with pytest.raises(ServerError, match=r"already serves \[.*\], not 'another-model'.*embedded\.port"):
        LlamaServer(config).start()


def test_embedded_profile_points_both_nodes_at_the_server(llm_server, tmp_path):
    path = write_profile(tmp_path / "llm.yaml", llm="embedded", embedded={"port": llm_server.config.port})
    lines = []
    with model_service(llm_profile.load_profile(path), say=lines.append) as service:
        overrides = service.merged({"control_node": {"temperature": 0.1}})
    assert "reused" in lines[-1]
    assert overrides["memory_node"] == {
        "memorizer": "openai",
        "openai_endpoint": llm_server.base_url,
        "openai_model": llm_server.model,
        "openai_api_key_env": "",
        "openai_timeout_s": 300.0,
        "openai_response_format": "json_object",
        "openai_keyframes": 0,
    }
    control = overrides["control_node"]
    assert (control["response_format"], control["knowledge"], control["prefetch"]) == ("json_object", "compact", 1)
    assert (control["backend"], control["endpoint"]) == ("openai", llm_server.base_url)
    assert control["model"] == "qwen2.5-coder-1.5b"
    assert control["temperature"] == 0.1  # the user's --set stays
    assert served_models(llm_server.base_url) is not None  # a reused server is not stopped


def test_nodes_take_the_profile_parameters(llm_server, tmp_path):
    from m3_agent import bringup

    path = write_profile(tmp_path / "llm.yaml", llm="none", embedded={"port": llm_server.config.port})
    with model_service(llm_profile.load_profile(path, "embedded"), say=lambda _: None) as service:
        overrides = service.merged({"memory_node": {"memory_dir": str(tmp_path / "memory")}})
        with bringup.running_nodes(None, ("memory_node", "control_node"), overrides) as (nodes, _):
            memory, control = nodes
            assert memory.get_parameter("memorizer").value == "openai"
            assert memory.get_parameter("openai_endpoint").value == llm_server.base_url
            assert control.get_parameter("backend").value == "openai"
            assert control.get_parameter("model").value == llm_server.model


def test_endpoint_mode_checks_the_servers(llm_server, tmp_path):
    url, model = llm_server.base_url, llm_server.model
    endpoint = {"memorizer_url": url, "memorizer_model": model, "control_url": url, "control_model": model}
    path = write_profile(tmp_path / "llm.yaml", llm="endpoint", endpoint=endpoint)
    with model_service(llm_profile.load_profile(path), say=lambda _: None) as service:
        assert service.overrides()["control_node"]["endpoint"] == url
        assert service.overrides()["control_node"]["api_key_env"] == "OPENAI_API_KEY"
        assert service.overrides()["control_node"]["response_format"] == "none"  # M3-Agent-Control's grammar
        assert service.overrides()["memory_node"]["openai_keyframes"] == 4
    with pytest.raises(ServerError, match=r"serves \['qwen2.5-coder-1.5b'\], not 'M3-Agent-Control'"):
        check_endpoint(url, "M3-Agent-Control", "", "control")
    with pytest.raises(ServerError, match="nothing answers at the memorizer endpoint"):
        check_endpoint(f"http://127.0.0.1:{free_port()}/v1", "m", "", "memorizer")


def test_profile_errors_are_clear(tmp_path):
    default = llm_profile.load_profile()
    assert default.llm == "none" and default.embedded.model == "qwen2.5-coder-1.5b"
    assert llm_profile.load_profile(None, "embedded").llm == "embedded"
    with pytest.raises(ValueError, match="llm must be one of"):
        llm_profile.load_profile(write_profile(tmp_path / "a.yaml", llm="auto"))
    with pytest.raises(ValueError, match=r"embedded: unknown setting\(s\) \['gpu'\]"):
        llm_profile.load_profile(write_profile(tmp_path / "b.yaml", embedded={"gpu": True}))
    with pytest.raises(ValueError, match=r"embedded\.port must be int"):
        llm_profile.load_profile(write_profile(tmp_path / "c.yaml", embedded={"port": "80"}))
    with pytest.raises(ValueError, match=r"embedded\.params: unknown node 'memory'"):
        llm_profile.load_profile(write_profile(tmp_path / "d.yaml", embedded={"params": {"memory": {}}}))
    with pytest.raises(ValueError, match=r"endpoint\.params\.control_node must be a mapping"):
        llm_profile.load_profile(write_profile(tmp_path / "e.yaml", endpoint={"params": {"control_node": 3}}))
    # the packaged file and the built-in defaults agree, so a profile without params behaves as documented
    assert default.embedded.params == llm_profile.EMBEDDED_PARAMS
    assert default.endpoint.params == llm_profile.ENDPOINT_PARAMS
    with pytest.raises(FileNotFoundError, match="LLM profile not found"):
        llm_profile.load_profile(tmp_path / "absent.yaml")


def stand_in(tmp_path: Path, code: str, timeout_s: float = 60.0) -> LlamaServer:
    config = ServerConfig(
        model_path=tmp_path / "m.gguf",
        model="m",
        port=free_port(),
        start_timeout_s=timeout_s,
        log_file=tmp_path / "server.log",
        command=[sys.executable, "-c", code],
    )
    return LlamaServer(config)


def test_a_server_that_exits_during_start_up_reports_its_log(tmp_path):
    code = "import sys; print('loading'); print('gguf_init: invalid magic', file=sys.stderr); sys.exit(3)"
    server = stand_in(tmp_path, code)
    with pytest.raises(ServerError, match="exited with code 3 during start-up") as error:
        server.start()
    assert "gguf_init: invalid magic" in str(error.value) and str(tmp_path / "server.log") in str(error.value)


def test_a_server_that_never_answers_is_stopped_and_reported(tmp_path):
    pid_file = str(tmp_path / "pid")
    code = f"import os,time; open({pid_file!r}, 'w').write(str(os.getpid())); print('stuck', flush=True); time.sleep(9)"
    server = stand_in(tmp_path, code, timeout_s=1.5)
    started = time.monotonic()
    with pytest.raises(ServerError, match=r"did not answer within 1.5 s.*start_timeout_s") as error:
        server.start()
    assert time.monotonic() - started < 15
    assert "stuck" in str(error.value)
    log = (tmp_path / "server.log").read_text()
    assert "--load-mode none" in log and "--alias m" in log
    assert not process_alive(int((tmp_path / "pid").read_text())), "the silent server was left running"


def test_missing_llama_server_is_a_clear_error(tmp_path, monkeypatch):
    from m3_agent.llm import server as server_module

    monkeypatch.setattr(server_module.sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    config = ServerConfig(model_path=tmp_path / "m.gguf", model="m", port=free_port())
    with pytest.raises(ServerError, match=r"llama.cpp's llama-server is not installed.*bootstrap.sh setup"):
        LlamaServer(config).start()


def test_a_profile_server_that_is_not_a_program_is_a_clear_error(tmp_path):
    from m3_agent.llm.service import server_config

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ServerError, match=r"embedded.server .*absent-server.*no executable file"):
        server_config(llm_profile.EmbeddedSettings(model=str(gguf), server=str(tmp_path / "absent-server")))
    binary = tmp_path / "llama-server-cuda"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    config = server_config(llm_profile.EmbeddedSettings(model=str(gguf), server=str(binary)))
    assert config.argv()[0] == str(binary)


def test_bad_model_file_stops_the_command(tmp_path):
    path = write_profile(tmp_path / "llm.yaml", llm="embedded", embedded={"model": str(tmp_path / "absent.gguf")})
    result = subprocess.run(
        ["m3", "run", "--nodes", "control_node", "--llm-config", str(path), "--exit-after", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert f"m3 run: error: model file not found: {tmp_path / 'absent.gguf'}" in result.stderr


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_serve_stops_its_server_when_it_ends(tmp_path, how):
    """`m3 llm serve` on a real server: Ctrl-C stops it in order; kill -9 of m3 ends it too (death signal)."""
    port = free_port()
    path = write_profile(tmp_path / "llm.yaml", embedded={"port": port, "log_file": str(tmp_path / "s.log")})
    serve = subprocess.Popen(
        ["m3", "llm", "serve", "--llm-config", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as in a terminal, also when the tests themselves run as a background job (SIGINT ignored there)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        ready = json.loads(serve.stdout.readline() or "{}")
        assert ready.get("base_url") == f"http://127.0.0.1:{port}/v1", serve.stderr.read()
        server_pid = ready["pid"]
        assert process_alive(server_pid)
        serve.send_signal(how)
        serve.wait(30)
        deadline = time.monotonic() + 20
        while process_alive(server_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not process_alive(server_pid)
        assert port_closed(ready["base_url"])
    finally:
        serve.kill()
