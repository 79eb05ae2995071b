"""`server(fallback)` and the registry's spec syntax, pure."""

from __future__ import annotations

from proxy.compaction.strategies import Background, Chain, Server, StrategyRegistry, server_params, without_server
from proxy.config import parse_strategy_spec, settings_from_mapping


def registry(**context: object) -> StrategyRegistry:
    return StrategyRegistry.from_settings(settings_from_mapping({"context": context}).context)


def test_spec_syntax() -> None:
    assert parse_strategy_spec("server(summarize)").server
    spec = parse_strategy_spec(" background( server(anchored) ) ")
    assert (spec.name, spec.background, spec.server) == ("anchored", True, True)
    assert parse_strategy_spec("server").name == "server"


def test_server_is_never_due_and_falls_back_to_its_strategy() -> None:
    reg = registry(server={"params": {"transforms": ["middle-out"]}})
    strategy = reg.build(("server(summarize)",))
    assert isinstance(strategy, Server) and strategy.name == "server(summarize)"
    assert server_params(strategy) == {"transforms": ["middle-out"]}
    assert without_server(strategy).name == "summarize"
    chained = reg.build(("server(summarize)", "reset"))
    assert isinstance(chained, Chain) and server_params(chained) is not None
    assert without_server(chained).name == "chain(summarize,reset)"
    background = reg.build(("background(server(anchored))",))
    assert isinstance(background, Background) and without_server(background).name == "anchored"
    plain = reg.build(("summarize",))
    assert server_params(plain) is None and without_server(plain) is plain


def test_compression_options_per_model() -> None:
    reg = registry(
        compression_guidelines=["Keep IDs"], tool_result_stub_threshold=100,
        models={"m": {"compression_guidelines": [], "custom_compression_instructions": "Mine."}},
    )  # fmt: skip
    default, special = reg.prompt_for("other"), reg.prompt_for("m")
    assert default.guidelines == ("Keep IDs",) and default.stub_threshold == 100
    assert special.guidelines == () and special.custom_instructions == "Mine." and special.stub_threshold == 100
    assert reg.build(("summarize",), "m") is not reg.build(("summarize",), "other")
    assert reg.build(("summarize",), "m") is reg.build(("summarize",), "m")
