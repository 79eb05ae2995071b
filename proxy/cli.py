"""Command line: `serve`, and the operators' `sessions` commands against the configured Redis."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import orjson

from proxy import __version__, logs, tracing
from proxy.app import create_app
from proxy.config import LOG_FORMATS, Settings, config_file, load_settings, with_overrides
from proxy.context.cache import PathCache
from proxy.errors import ConfigError, Conflict, StoreUnavailable
from proxy.events import EventBus
from proxy.serving import run_app
from proxy.sessions import Identity, tenant_of
from proxy.sessions.view import session_view
from proxy.store import EmbeddedRedis, EmbeddedServerError, SessionKeys, Store, running_server_url
from proxy.turn.clear import clear_context
from proxy.workers import serve_workers


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="context-proxy", description="OpenAI-compatible context-managing gateway")
    parser.add_argument("--config", help="config file (default: $CONTEXT_PROXY_CONFIG, else ./config.yaml)")
    parser.add_argument("--version", action="version", version=f"context-proxy {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", dest="sub_config", help=argparse.SUPPRESS)
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", help="worker processes on the one port: a number, or auto (one per core)")
    serve.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    serve.add_argument("--log-format", choices=LOG_FORMATS, help="text (default) or json: one object per line")
    sessions = commands.add_parser("sessions", help="inspect or delete stored sessions")
    sessions.add_argument("--config", dest="sub_config", help=argparse.SUPPRESS)
    actions = sessions.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="every session, most recently used first")
    for name, text in (
        ("show", "a session's journal summary"),
        ("export", "a session's whole journal as JSON"),
        ("delete", "forget a session: every key of it"),
        ("reset-breaker", "close a session's compaction circuit breaker"),
        ("clear", "start a fresh context (the journal keeps every turn)"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("session")
        who = action.add_mutually_exclusive_group()
        who.add_argument("--tenant", help="tenant hash, as `sessions list` prints it")
        who.add_argument("--api-key", help="the client's API key (hashed, never stored)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = args.sub_config or args.config
        settings = load_settings(config)
        if args.command == "serve":
            logs.configure(args.log_level, args.log_format or settings.server.log_format)
            tracing.setup(os.environ)
            source = str(config_file(config) or "(defaults)")
            return _serve(with_overrides(settings, host=args.host, port=args.port, workers=args.workers), source)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
        return asyncio.run(_sessions(settings, args))
    except BrokenPipeError:
        # the reader left (`sessions list | head`): stop quietly, and let the exit flush go nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ConfigError as exc:
        print(f"context-proxy: {exc}", file=sys.stderr)
        return 2
    except (EmbeddedServerError, StoreUnavailable, Conflict, OSError) as exc:
        print(f"context-proxy: {exc}", file=sys.stderr)
        return 1


def _serve(settings: Settings, source: str) -> int:
    def started(port: int) -> None:
        fields = logs.startup_fields(with_overrides(settings, port=port), source)
        logging.getLogger("context_proxy").info(fields)

    if settings.server.workers > 1:
        return serve_workers(settings, on_listening=started)
    run_app(create_app(settings), settings, on_listening=lambda: started(settings.server.port))
    return 0


@asynccontextmanager
async def _store(settings: Settings) -> AsyncIterator[Store]:
    """The configured store; with `embedded`, the running proxy's server or a private one."""
    url = settings.redis.url
    embedded = None
    if url == "embedded":
        url = running_server_url(settings.redis.data_dir) or ""
        if not url:
            embedded = EmbeddedRedis(settings.redis.data_dir)
            url = await embedded.start()
    redis = settings.redis
    store = await Store.connect(
        url, cluster=redis.cluster, wait_replicas=redis.wait_replicas, wait_timeout_ms=redis.wait_timeout_ms
    )
    try:
        yield store
    finally:
        await store.close()
        if embedded is not None:
            await embedded.stop()


async def _sessions(settings: Settings, args: argparse.Namespace) -> int:
    async with _store(settings) as store:
        if args.action == "list":
            print(f"{'last used (UTC)':20} {'tenant':32} session")
            async for tenant, session, used in store.iter_sessions():
                when = datetime.fromtimestamp(used, UTC).strftime("%Y-%m-%d %H:%M:%S")
                print(f"{when:20} {tenant:32} {session}")
            return 0
        keys = await _resolve(store, args)
        if keys is None:
            return 1
        if args.action == "delete":
            await store.delete_session(keys)
            print(f"deleted session {keys.session}")
            return 0
        if args.action == "clear":
            if not await store.session_exists(keys):
                print(f"context-proxy: no session {keys.session}", file=sys.stderr)
                return 1
            identity = Identity(keys.tenant, keys.session, derived=False)
            cleared = await clear_context(store, PathCache(0), identity, EventBus([]), settings.sessions.ttl_s)
            print(f"cleared session {keys.session}: window {cleared['window']}, {len(cleared['cleared_turns'])} turns")
            return 0
        if args.action == "reset-breaker":
            await store.reset_breaker(keys)
            print(f"circuit breaker closed for session {keys.session}")
            return 0
        dump = await store.read_session(keys)
        if dump is None:
            print(f"context-proxy: no session {keys.session}", file=sys.stderr)
            return 1
        view = session_view(keys.session, dump)
        if args.action == "export":
            sys.stdout.write(orjson.dumps(view, option=orjson.OPT_INDENT_2).decode() + "\n")
            return 0
        print(f"session {keys.session} (tenant {keys.tenant})")
        print(f"  turns: {view['totals']['turns']} ({view['totals']['completed']} completed), head {view['head']}")
        print(f"  window: {view['window']['current']}; branches: {len(view['branches'])}")
        for turn in view["turns"]:
            print(
                f"  #{turn['seq']:<4} parent {turn['parent']:<4} {turn['status']:<11} {turn['model']} tokens={turn['tokens']}"
            )
        return 0


async def _resolve(store: Store, args: argparse.Namespace) -> SessionKeys | None:
    if args.tenant:
        return SessionKeys(args.tenant, args.session)
    if args.api_key:
        return SessionKeys(tenant_of(f"Bearer {args.api_key}", ""), args.session)
    tenants = [tenant async for tenant, session, _ in store.iter_sessions() if session == args.session]
    if len(tenants) == 1:
        return SessionKeys(tenants[0], args.session)
    if not tenants:
        print(f"context-proxy: no such session: {args.session}", file=sys.stderr)
    else:
        print(
            f"context-proxy: {len(tenants)} tenants have a session named {args.session}; give --tenant or --api-key",
            file=sys.stderr,
        )
    return None
