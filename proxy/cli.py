"""Command line: `serve`, and the operators' `sessions`, `keys` and `report` commands against the configured Redis."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import orjson

from proxy import __version__, logs, tracing
from proxy.app import create_app
from proxy.compaction.breaker import CLOSED
from proxy.config import LOG_FORMATS, Settings, config_file, load_settings, with_overrides
from proxy.errors import ConfigError, ProxyError
from proxy.events import EventBus
from proxy.gateway import Gateway
from proxy.serving import run_app
from proxy.session_api.clear import clear_context
from proxy.session_api.report import Report, Scope, report_table, since_seconds
from proxy.session_api.view import session_view
from proxy.sessions import Identity, tenant_of
from proxy.store import EmbeddedRedis, EmbeddedServerError, SessionKeys, Store, running_server_url
from proxy.turn.paths import PathCache
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
    _add_keys_parser(commands)
    report = commands.add_parser("report", help="tokens and money saved, by key (tenant) and model")
    report.add_argument("--config", dest="sub_config", help=argparse.SUPPRESS)
    report.add_argument("--since", default="7d", help="turns created in the last 7d, 24h, 90m (default 7d)")
    report.add_argument("--key", help="one gateway key (tenant) only")
    return parser


def _add_keys_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = commands.add_parser("keys", help="create, list or revoke gateway keys")
    keys.add_argument("--config", dest="sub_config", help=argparse.SUPPRESS)
    actions = keys.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="a new gateway key, printed once")
    create.add_argument("name", help="1-64 of A-Z a-z 0-9 . _ -; the tenant of the key's sessions")
    create.add_argument("--rpm", type=int, help="requests per rolling minute")
    create.add_argument("--tpm", type=int, help="tokens per rolling minute")
    create.add_argument("--budget-tokens", type=int, help="tokens per budget period")
    create.add_argument("--budget-period", choices=("day", "month"), default="day")
    create.add_argument("--models", nargs="+", metavar="GLOB", help="allow-list of model globs (default: any)")
    create.add_argument(
        "--mode", choices=("managed", "shadow"), help="the key's turns: managed, or shadow (counted only)"
    )
    actions.add_parser("list", help="every key with its limits and this period's usage (never a key)")
    revoke = actions.add_parser("revoke", help="revoke a run-time key")
    revoke.add_argument("name")


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
        if args.command == "keys":
            return asyncio.run(_keys(settings, args))
        if args.command == "report":
            return asyncio.run(_report(settings, args))
        return asyncio.run(_sessions(settings, args))
    except BrokenPipeError:
        # the reader left (`sessions list | head`): stop quietly, and let the exit flush go nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ConfigError as exc:
        print(f"context-proxy: {exc}", file=sys.stderr)
        return 2
    except (EmbeddedServerError, ProxyError, OSError) as exc:
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


async def _keys(settings: Settings, args: argparse.Namespace) -> int:
    async with _store(settings) as store:
        admin = Gateway(settings, store).admin
        if args.action == "create":
            flags = {"name": args.name, "models": args.models, "rpm": args.rpm, "tpm": args.tpm,
                     "budget_tokens": args.budget_tokens, "budget_period": args.budget_period,
                     "mode": args.mode}  # fmt: skip
            policy, secret = await admin.create({k: v for k, v in flags.items() if v is not None})
            print(secret)
            print(f"created gateway key {policy.name}; the key is shown this once", file=sys.stderr)
        elif args.action == "revoke":
            await admin.revoke(args.name)
            print(f"revoked gateway key {args.name}")
        else:
            _print_keys(await admin.list())
    return 0


def _print_keys(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'name':24} {'source':8} {'rpm':>6} {'tpm':>9} {'budget':>16} {'period':10} {'requests':>8} {'tokens':>10} "
        f"{'saved':>10} {'saved $':>9}  models"
    )
    for row in rows:
        budget = f"{row['budget_tokens']}/{row['budget_period']}" if row["budget_tokens"] else "-"
        usage = row["usage"][row["budget_period"]]
        models = " ".join(row["models"]) if row["models"] is not None else "*"
        print(
            f"{row['name']:24} {row['source']:8} {row['rpm'] or '-':>6} {row['tpm'] or '-':>9} {budget:>16} "
            f"{usage['period']:10} {usage['requests']:>8} {usage['tokens']:>10} {usage['saved_tokens']:>10} "
            f"{usage['saved_usd']:>9.4f}  {models}"
        )


async def _report(settings: Settings, args: argparse.Namespace) -> int:
    try:
        since = time.time() - since_seconds(args.since)
    except ValueError as exc:
        print(f"context-proxy: {exc}", file=sys.stderr)
        return 2
    report = Report(Scope(since, args.key), settings.context.price_for)
    async with _store(settings) as store:
        async for tenant, session, used in store.iter_sessions():
            if used < since or (args.key is not None and tenant != args.key):
                continue  # a session last used before the period has no turn in it
            dump = await store.read_session(SessionKeys(tenant, session))
            if dump is not None:
                report.add(tenant, dump)
    print("\n".join(report_table(report.rows)))
    return 0


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
            await store.reset_breaker(keys, CLOSED)
            print(f"circuit breaker closed for session {keys.session}")
            return 0
        dump = await store.read_session(keys)
        if dump is None:
            print(f"context-proxy: no session {keys.session}", file=sys.stderr)
            return 1
        view = session_view(keys.session, dump, settings.context.price_for)
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
