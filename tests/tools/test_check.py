"""``wavemla check``: structural checks, the classification rules, injected corruption, and a real server."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from wavemla import cli
from wavemla.tools import check
from wavemla.tools.check import (
    CheckConfig,
    Probe,
    classify,
    scripts,
    structural_violations,
    tag_violations,
)
from wavemla.tools.openai_client import RequestRecord, TokenLogprob, ToolCallAccum, UsageError

from .fake_openai_server import FakeOpenAIServer, Faults
from .tiny_transformers_server import shared_server

TOOLS = (
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "search_docs", "parameters": {"type": "object"}}},
)
TEXT_PROBE = Probe("t", messages=({"role": "user", "content": "Say something about the weather."},))
TOOL_PROBE = Probe("w", messages=({"role": "user", "content": "Weather in Paris?"},), tools=TOOLS)


def out(
    chunks: list[str],
    finish: str = "stop",
    calls: list[tuple[str, str]] = (),  # type: ignore[assignment]
    logprobs: list[TokenLogprob] | None = None,
) -> RequestRecord:
    r = RequestRecord(start=0.0, end=1.0, finish_reason=finish)
    r.chunk_texts = list(chunks)
    r.chunk_times = [0.1 * (i + 1) for i in range(len(chunks))]
    r.content = "".join(chunks)
    for i, (name, args) in enumerate(calls):
        r.tool_calls[i] = ToolCallAccum(id=f"c{i}", name=name, arguments=args)
        r.chunk_texts += [name, args]
    r.logprobs = logprobs or []
    return r


WORDS = ["The", " sky", " is", " grey", " and", " it", " will", " rain", " later", " today", "."]


def kinds(rec: RequestRecord, probe: Probe = TEXT_PROBE, ws: int = 16) -> list[str]:
    return sorted(v.kind for v in structural_violations(rec, probe.tool_names, ws))


# ----- structural checks -----


def test_clean_output_has_no_violations() -> None:
    assert kinds(out(WORDS)) == []
    assert kinds(out([], finish="tool_calls", calls=[("get_weather", '{"city": "Paris"}')]), TOOL_PROBE) == []


@pytest.mark.parametrize(
    ("rec", "expected"),
    [
        pytest.param(out(["Hi<|im_start|>assistant"]), ["special_token"], id="im-start"),
        pytest.param(out(["done<｜end▁of▁sentence｜>"]), ["special_token"], id="deepseek-eos"),
        pytest.param(out(["a" + " " * 20 + "b"]), ["whitespace_flood"], id="spaces"),
        pytest.param(out(["a" + "\n" * 16 + "b"]), ["whitespace_flood"], id="newlines"),
        pytest.param(out(["caf\ufffd"]), ["replacement_char"], id="bad-utf8"),
        pytest.param(out(["<think>x</think></think>"]), ["unbalanced_tag"], id="stray-close"),
        pytest.param(out(["<think>x"]), ["unbalanced_tag"], id="unclosed"),
        pytest.param(out(["<tool_call><arg>1</tool_call></arg>"]), ["unbalanced_tag", "unbalanced_tag"], id="nest"),
        pytest.param(out(["<｜DSML｜invoke name=x>"]), ["unbalanced_tag"], id="dsml-unclosed"),
    ],
)
def test_text_violations(rec: RequestRecord, expected: list[str]) -> None:
    assert kinds(rec) == expected


def test_truncated_output_may_leave_a_tag_open() -> None:
    assert kinds(out(["<think>still thinking"], finish="length")) == []
    assert kinds(out(["<think>x</think>"])) == []
    assert kinds(out(["a < b and c > d, x<y>z"])) == []  # comparisons and unknown never-closed tags
    assert kinds(out(["<br/> <｜DSML｜invoke name=x></｜DSML｜invoke>"])) == []


def test_tool_call_violations() -> None:
    bad_json = out([], finish="tool_calls", calls=[("get_weather", '{"city": "Par')])
    assert kinds(bad_json, TOOL_PROBE) == ["tool_args_json"]
    not_object = out([], finish="tool_calls", calls=[("get_weather", '["Paris"]')])
    assert kinds(not_object, TOOL_PROBE) == ["tool_args_json"]
    unknown = out([], finish="tool_calls", calls=[("get_wether", "{}")])
    assert kinds(unknown, TOOL_PROBE) == ["tool_name"]
    assert kinds(out([], calls=[("get_weather", "{}")]), TEXT_PROBE) == ["tool_name"]  # no tools offered
    flood = out([], calls=[("get_weather", '{"city":' + " " * 40 + '"Paris"}')])
    assert kinds(flood, TOOL_PROBE) == ["whitespace_flood"]


def test_tag_violation_details() -> None:
    details = [v.detail for v in tag_violations("<tool_calls><invoke></tool_calls>", truncated=False)]
    assert details == ["</tool_calls> closes across <invoke>"]


def test_scripts() -> None:
    assert scripts("Hello, мир 世界 1+1") == {"LATIN", "CYRILLIC", "CJK"}


# ----- classification rules -----


def test_identical_output_matches() -> None:
    assert classify(out(WORDS), out(WORDS), TEXT_PROBE).cls == "match"


def test_late_flip_is_benign_and_early_flip_is_suspect() -> None:
    ref = out(WORDS)
    late = out([*WORDS[:9], " tomorrow", "."])
    v = classify(ref, late, TEXT_PROBE)
    assert v.cls == "benign" and v.divergence_chunk == 9
    assert v.divergence_char == len("".join(WORDS[:9])) + len(" to")  # " today" vs " tomorrow"
    assert v.relative is not None and v.relative > 0.5
    early = out(["The", " sea", " is", " calm", "."])
    v = classify(ref, early, TEXT_PROBE)
    assert v.cls == "suspect" and v.divergence_chunk == 1 and v.divergence_char == len("The s")
    assert classify(ref, early, TEXT_PROBE, late_fraction=0.0).cls == "benign"


def test_finish_reason_change_alone_is_a_late_divergence() -> None:
    v = classify(out(WORDS), out(WORDS, finish="length"), TEXT_PROBE)
    assert v.cls == "benign" and v.relative == 1.0


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param([*WORDS[:9], "<|im_end|>"], id="special-token"),
        pytest.param([*WORDS[:9], " " * 80], id="whitespace-flood"),
        pytest.param([*WORDS[:9], " 今天"], id="new-script"),
        pytest.param([*WORDS[:9], " </think>"], id="stray-tag"),
    ],
)
def test_late_damage_is_corruption(bad: list[str]) -> None:
    v = classify(out(WORDS), out(bad), TEXT_PROBE)
    assert v.cls == "corruption" and v.reasons


def test_broken_tool_json_is_corruption() -> None:
    ref = out([], finish="tool_calls", calls=[("get_weather", '{"city": "Paris"}')])
    bad = out([], finish="tool_calls", calls=[("get_weather", '{"city": "Paris"')])
    v = classify(ref, bad, TOOL_PROBE)
    assert v.cls == "corruption" and v.new_violations == {"tool_args_json": 1}


def test_tool_call_cut_by_max_tokens_is_not_broken_json() -> None:
    cut = out([], finish="length", calls=[("get_weather", '{"city": "Paris"}'), ("search_docs", '{"query": "pa')])
    assert kinds(cut, TOOL_PROBE) == []
    first_broken = out([], finish="length", calls=[("get_weather", '{"city": "Par'), ("search_docs", '{"q')])
    assert kinds(first_broken, TOOL_PROBE) == ["tool_args_json"]  # only the call being written may be cut
    # A near-tie flip made the answer a little longer, so max_tokens cut its tool call: benign, not corruption.
    tops = {"Sure": -0.60, "OK": -0.65}
    ref = out(["Sure"], finish="tool_calls", calls=[("get_weather", '{"city": "Paris"}')])
    ref.logprobs = [TokenLogprob("Sure", -0.60, tops)]
    longer = out(["OK"], finish="length", calls=[("get_weather", '{"city": "Pa')])
    longer.logprobs = [TokenLogprob("OK", -0.65, {})]
    v = classify(ref, longer, TOOL_PROBE)
    assert v.cls == "benign" and v.new_violations == {}


def test_violation_already_in_the_reference_is_not_new() -> None:
    ref = out(["<|eot|>", *WORDS])
    v = classify(ref, out(["<|eot|>", *WORDS[:9], " soon"]), TEXT_PROBE)
    assert v.cls == "benign" and v.new_violations == {}
    v = classify(ref, out(["<|eot|>", *WORDS[:9], "<|eot|>"]), TEXT_PROBE)
    assert v.cls == "corruption" and v.new_violations == {"special_token": 1}


def lp(tokens: list[str], tops: list[dict[str, float]]) -> list[TokenLogprob]:
    return [TokenLogprob(t, top[t], top) for t, top in zip(tokens, tops, strict=True)]


def test_logprobs_decide_early_flips() -> None:
    tops = [{"The": -0.1}, {" sky": -0.70, " sea": -0.75, " day": -3.0}]
    ref = out(["The", " sky"], logprobs=lp(["The", " sky"], tops))
    near = out(["The", " sea"], logprobs=[TokenLogprob("The", -0.1, {}), TokenLogprob(" sea", -0.7, {})])
    v = classify(ref, near, TEXT_PROBE)
    assert v.cls == "benign" and v.divergence_token == 1 and "near-tie" in v.reasons[0]
    far = out(["The", " day"], logprobs=[TokenLogprob("The", -0.1, {}), TokenLogprob(" day", -0.1, {})])
    v = classify(ref, far, TEXT_PROBE, margin=1.0)
    assert v.cls == "corruption" and "2.30 nats below" in v.reasons[0]
    assert classify(ref, far, TEXT_PROBE, margin=2.5).cls == "benign"
    outside = out(["The", " cat"], logprobs=[TokenLogprob("The", -0.1, {}), TokenLogprob(" cat", -0.1, {})])
    v = classify(ref, outside, TEXT_PROBE, margin=100.0)
    assert v.cls == "corruption" and "not among the reference's top 3" in v.reasons[0]


# ----- arguments -----


@pytest.mark.parametrize(
    ("changes", "flag"),
    [
        ({"concurrency": ()}, "--concurrency"),
        ({"concurrency": (1, 0)}, "--concurrency"),
        ({"url": "http//x"}, "--url"),
        ({"repeats": 0}, "--repeats"),
        ({"max_tokens": -1}, "--max-tokens"),
        ({"num_prompts": 0}, "--num-prompts"),
        ({"reference_runs": 0}, "--reference-runs"),
        ({"top_logprobs": -1}, "--top-logprobs"),
        ({"margin": 0.0}, "--margin"),
        ({"late_fraction": 1.5}, "--late-fraction"),
        ({"timeout": -1.0}, "--timeout"),
        ({"timeout": float("inf")}, "--timeout"),
        ({"timeout": float("nan")}, "--timeout"),
        ({"out": ""}, "--out"),  # the current directory
        ({"out": " "}, "--out"),
    ],
)
def test_bad_config_names_the_argument(changes: dict[str, Any], flag: str) -> None:
    base: dict[str, Any] = {"url": "http://127.0.0.1:1", "concurrency": (1,)}
    with pytest.raises(UsageError, match=f"^{flag}: "):
        CheckConfig(**{**base, **changes}).validate()


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    check.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_cli_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert check.run(_parse("--url", "http://127.0.0.1:1", "--concurrency", "-1")) == 2
    assert "--concurrency: levels must be >= 1" in capsys.readouterr().err


def test_help_documents_the_rules(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["check", "--help"])
    text = capsys.readouterr().out
    assert "near-tie flip" in text and "late flip" in text and "--strict" in text


def test_builtin_probes_include_tool_calls() -> None:
    probes, notes = check.select_probes(CheckConfig(url="http://h", concurrency=(1,)))
    assert sum(1 for p in probes if p.tools) >= 3 and not notes
    probes, notes = check.select_probes(CheckConfig(url="http://h", concurrency=(1,), endpoint="completions"))
    assert probes and all(p.prompt and not p.tools for p in probes) and notes


# ----- against the fault-injection server -----


def _run(url: str, tmp_path: Path, *extra: str, model: str | None = None) -> tuple[int, dict[str, Any]]:
    argv = ["check", "--url", url, "--out", str(tmp_path), "--quiet", *extra]
    if model:
        argv += ["--model", model]
    code = cli.main(argv)
    return code, json.loads((tmp_path / "check.json").read_text())


def test_finds_injected_corruption(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The server damages outputs only while more than 2 requests are in flight.
    with FakeOpenAIServer(Faults(corrupt_above=2, delay_s=0.01)) as server:
        code, doc = _run(server.url, tmp_path, "--concurrency", "1", "8", "--max-tokens", "16")
        sent = server.stats.requests
        peak = server.stats.max_in_flight
    assert code == 1
    assert "CORRUPTION FOUND" in capsys.readouterr().out
    assert peak >= 8 and sent < 200
    solo, loaded = doc["levels"]
    assert solo["corruption"] == 0 and solo["exact_match_rate"] == 1.0
    # Eight probes start together; each is damaged when its middle token is made with more than 2 in flight.
    assert loaded["completed"] == 8 and loaded["corruption"] >= 4
    assert loaded["corruption_rate"] == loaded["corruption"] / 8
    assert "special_token" in loaded["new_violations"]
    assert set(loaded["new_violations"]) <= {"special_token", "tool_args_json"}
    assert loaded["violations"] == loaded["new_violations"]  # the references are clean
    assert loaded["structurally_valid"] == 8 - loaded["corruption"]
    assert solo["structurally_valid_rate"] == 1.0
    bad = [r for r in loaded["results"] if r["class"] == "corruption"]
    assert all(r["divergence_char"] is not None and r["reasons"] for r in bad)
    assert doc["corruption_found"] is True and doc["status"] == "complete"


def test_near_tie_flips_are_benign(tmp_path: Path) -> None:
    with FakeOpenAIServer(Faults(flip_above=2, delay_s=0.01)) as server:
        code, doc = _run(server.url, tmp_path, "--concurrency", "8", "--max-tokens", "16", "--num-prompts", "4")
    assert code == 0
    lv = doc["levels"][0]
    text_rows = [r for r in lv["results"] if r["probe"] in ("sky", "primes", "code", "json")]
    assert {r["class"] for r in text_rows} <= {"benign", "match"}
    flipped = [r for r in text_rows if r["class"] == "benign"]
    assert len(flipped) >= 2 and all(r["divergence_token"] == 8 for r in flipped)
    assert all("near-tie flip at token 8" in r["reasons"][0] for r in flipped)
    assert lv["corruption"] == 0 and doc["corruption_found"] is False


def test_without_logprobs_early_flips_are_suspect_and_strict_fails(tmp_path: Path) -> None:
    faults = Faults(flip_above=2, delay_s=0.01)
    common = ["--concurrency", "8", "--max-tokens", "16", "--num-prompts", "2", "--top-logprobs", "0"]
    with FakeOpenAIServer(faults) as server:
        code, doc = _run(server.url, tmp_path / "a", *common, "--late-fraction", "0.9")
        assert code == 0
        assert doc["levels"][0]["suspect"] >= 1 and doc["levels"][0]["corruption"] == 0
        code, doc = _run(server.url, tmp_path / "b", *common, "--late-fraction", "0.9", "--strict")
        assert code == 1 and doc["levels"][0]["corruption_rate"] > 0


def test_errors_are_counted_not_fatal(tmp_path: Path) -> None:
    faults = Faults(every=5, kinds=("disconnect", "http500", "garbage"), delay_s=0.002)
    with FakeOpenAIServer(faults) as server:
        code, doc = _run(server.url, tmp_path, "--concurrency", "1", "6", "--max-tokens", "12", "--repeats", "2")
    assert doc["status"] == "complete"
    assert len(doc["reference"]) + len(doc["reference_failures"]) == 8
    assert doc["reference_failures"]  # the 5th request of the run failed
    errors: dict[str, int] = {}
    for lv in doc["levels"]:
        assert lv["completed"] + sum(lv["errors"].values()) == lv["probes"]
        for k, n in lv["errors"].items():
            errors[k] = errors.get(k, 0) + n
    assert set(errors) <= {"disconnect", "http_500", "malformed_sse"} and errors
    assert all(lv["corruption"] == 0 for lv in doc["levels"]) and code == 0


def test_unreachable_server_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAIServer() as server:
        url = server.url
    code = cli.main(["check", "--url", url, "--model", "m", "--concurrency", "1", "--out", str(tmp_path)])
    assert code == 3 and "--url: cannot connect" in capsys.readouterr().err


def test_unreachable_server_without_model_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAIServer() as server:
        url = server.url
    code = cli.main(["check", "--url", url, "--concurrency", "1", "--out", str(tmp_path), "--quiet"])
    assert code == 3 and "--url: cannot connect" in capsys.readouterr().err


# ----- against the real server -----


@pytest.mark.serving
def test_real_server_has_no_corruption(tmp_path: Path) -> None:
    server = shared_server()
    extra = ["--concurrency", "1", "8", "32", "--max-tokens", "16", "--reference-runs", "2", "--timeout", "120"]
    code, doc = _run(server.url, tmp_path, *extra, model=server.model)
    assert code == 0, server.log_tail()
    assert doc["status"] == "complete" and not doc["reference_failures"]
    assert len(doc["reference"]) == len(check.BUILTIN_PROBES)
    assert all(r["stable"] and r["output_tokens"] == 16 for r in doc["reference"])
    for lv in doc["levels"]:
        assert lv["completed"] == len(check.BUILTIN_PROBES), lv["errors"]
        assert lv["exact_match_rate"] == 1.0
        assert lv["corruption"] == 0 and lv["corruption_rate"] == 0.0
        assert lv["structurally_valid_rate"] == 1.0 and lv["violations"] == {}
    assert doc["levels"][-1]["fillers"] > 0


def test_level_counts_violations_of_tags_the_reference_closes() -> None:
    """A tag the reference closes is tracked in the output too (the docstring's rule): the level's violation counts
    and structurally-valid rate agree with the classification that called the output corruption."""
    ref = out(["<answer>", "<b>bold</b>", " done", "</answer>"])
    broken = out(["<answer>", "<b>bold", " done", "</answer>"])  # </answer> closes across <b>
    probe_ref = check.ProbeRef(TEXT_PROBE, ref, True, [])
    level = check.judge_level(CheckConfig(url="http://h", concurrency=(1,)), 4, [(probe_ref, 0, broken)], [])
    assert level["corruption"] == 1 and level["new_violations"] == {"unbalanced_tag": 1}
    assert level["violations"] == {"unbalanced_tag": 1}
    assert level["structurally_valid"] == 0 and level["results"][0]["structurally_valid"] is False


def test_prompt_file_max_tokens_is_sent(tmp_path: Path) -> None:
    """A probe file's per-prompt ``max_tokens`` (the sweep's prompt-file format) overrides ``--max-tokens``."""
    prompts = tmp_path / "probes.jsonl"
    prompts.write_text('{"prompt": "Count to ten.", "max_tokens": 7}\n"Say hi."\n')
    cfg = CheckConfig(url="http://h", concurrency=(1,), endpoint="completions", prompts=str(prompts), max_tokens=32)
    probes, _ = check.select_probes(cfg)
    assert [check.probe_spec(cfg, p).max_tokens for p in probes] == [7, 32]
