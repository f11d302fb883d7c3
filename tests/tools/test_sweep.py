"""``wavemla sweep``: metrics by hand on fixed timestamps, flags, arguments, faults, and a real server."""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest

from wavemla import cli
from wavemla.tools import sweep
from wavemla.tools.openai_client import RequestRecord, UsageError
from wavemla.tools.sweep import LevelRun, SweepConfig, bucket_rates, flag_levels, level_metrics, tokens_in_window

from .fake_openai_server import FakeOpenAIServer, Faults
from .tiny_transformers_server import shared_server


def rec(
    start: float,
    chunks: list[float],
    end: float,
    usage: int | None = None,
    prompt: int | None = None,
    error: str | None = None,
) -> RequestRecord:
    r = RequestRecord(start=start, end=end, chunk_times=list(chunks), chunk_texts=["t"] * len(chunks))
    r.completion_tokens, r.prompt_tokens, r.finish_reason = usage, prompt, "length"
    if error:
        r.fail(error, "injected")
    return r


def hand_level() -> LevelRun:
    """Concurrency 2. Times in seconds; the window is [1.0, 2.0] (first measured send, last measured end)."""
    a = rec(1.0, [1.2, 1.3, 1.5], 1.6, usage=3, prompt=10)
    b = rec(1.1, [1.4, 1.8], 2.0, usage=4, prompt=20)  # 2 tokens per chunk
    c = rec(1.2, [], 1.25, error="http_500")
    warm = rec(0.0, [0.5, 0.9, 1.05], 1.1)  # no usage: the level's 1.4 tokens per chunk, one chunk inside
    filler = rec(1.6, [1.7, 1.9, 1.95, 2.1], 2.1, error="cancelled")  # three chunks inside
    return LevelRun(2, warmup=[warm], measured=[a, b, c], others=[filler], window=(1.0, 2.0), wall_s=2.2)


def test_level_metrics_by_hand() -> None:
    m = level_metrics(hand_level(), bucket_s=0.5)
    assert (m["requests"], m["completed"], m["failed"]) == (3, 2, 1)
    assert m["errors"] == {"http_500": 1} and m["filler_errors"] == {}
    assert m["window_s"] == pytest.approx(1.0)
    # The records with usage carry (3 + 4) / (3 + 2) = 1.4 tokens per chunk: the weight of a chunk without usage.
    # a: 3 + b: 2 chunks x 2 + warm-up: 1 x 1.4 + filler: 3 x 1.4 = 12.6 tokens in 1 s
    assert m["output_tokens_in_window"] == pytest.approx(12.6)
    assert m["output_tok_s"] == pytest.approx(12.6)
    assert m["aggregate_tok_s_per_user"] == pytest.approx(6.3)
    assert m["requests_per_s"] == pytest.approx(2.0)
    # slices [1.0, 1.5): 2 + 2 + 1.4 = 5.4 tokens; [1.5, 2.0]: 1 + 2 + 4.2 = 7.2 tokens; 0.5 s each
    s = m["output_tok_s_slices"]
    assert (s["n"], s["mean"], s["median"]) == (2, pytest.approx(12.6), pytest.approx(12.6))
    assert s["p90"] == pytest.approx(14.04)
    # TTFT a 0.2, b 0.3
    assert m["ttft_ms"] == {"n": 2, "mean": pytest.approx(250), "median": pytest.approx(250),
                            "p90": pytest.approx(290), "p99": pytest.approx(299)}  # fmt: skip
    # TPOT a (0.6 - 0.2) / 2 = 0.2, b (0.9 - 0.3) / 3 = 0.2
    assert m["tpot_ms"]["mean"] == pytest.approx(200) and m["tpot_ms"]["p99"] == pytest.approx(200)
    # ITL pooled: a 0.1, 0.2; b 0.4
    assert m["itl_ms"] == {"n": 3, "mean": pytest.approx(700 / 3), "median": pytest.approx(200),
                           "p90": pytest.approx(360), "p99": pytest.approx(396)}  # fmt: skip
    assert m["e2e_ms"]["mean"] == pytest.approx(750) and m["e2e_ms"]["median"] == pytest.approx(750)
    # per user: (3 - 1) / 0.4 = 5 and (4 - 1) / 0.6 = 5
    assert m["tok_s_per_user"]["mean"] == pytest.approx(5.0)
    assert m["input_tokens"]["mean"] == pytest.approx(15.0)
    assert m["output_tokens"]["mean"] == pytest.approx(3.5)
    assert m["usage_source"] == "server"


def test_tokens_without_chunks_land_at_stream_end() -> None:
    quiet = rec(0.0, [], 0.8, usage=5)  # the server streamed tokens that decode to no text
    assert tokens_in_window([quiet], 0.0, 1.0) == pytest.approx(5.0)
    assert tokens_in_window([quiet], 0.0, 0.5) == 0.0
    assert bucket_rates([quiet], 0.0, 1.0, 0.5) == pytest.approx([0.0, 10.0])


def test_cancelled_filler_counts_the_tokens_per_chunk_of_the_level() -> None:
    # The server packs two tokens into every chunk (speculative decoding, a stream interval): the finished
    # requests report 8 tokens in 4 chunks each. The filler cancelled at the window end never got its usage,
    # yet it generated 2 tokens per chunk as well: 8 + 8 + 8 tokens inside the window, not 8 + 8 + 4.
    a = rec(0.0, [0.1, 0.2, 0.3, 0.4], 0.5, usage=8)
    b = rec(0.5, [0.6, 0.7, 0.8, 0.9], 1.0, usage=8)
    filler = rec(0.5, [0.6, 0.7, 0.8, 0.9], 1.0, error="cancelled")
    m = level_metrics(LevelRun(2, warmup=[], measured=[a, b], others=[filler], window=(0.0, 1.0), wall_s=1.0))
    assert m["output_tokens_in_window"] == pytest.approx(24.0)
    assert m["output_tok_s_slices"]["mean"] == pytest.approx(24.0)


def test_bucket_edges_count_once() -> None:
    r = rec(0.0, [0.0, 0.5, 1.0], 1.0)
    assert bucket_rates([r], 0.0, 1.0, 0.5) == pytest.approx([2.0, 4.0])
    assert sum(bucket_rates([r], 0.0, 1.0, 0.5)) * 0.5 == pytest.approx(tokens_in_window([r], 0.0, 1.0))


def _level(c: int, tok_s: float, completed: int = 8, failed: int = 0) -> dict[str, Any]:
    return {
        "concurrency": c,
        "output_tok_s": tok_s,
        "completed": completed,
        "failed": failed,
        "requests": completed + failed,
        "errors": {"timeout": failed} if failed else {},
        "flags": [],
    }


def test_cliff_flag_against_any_lower_level() -> None:
    levels = [_level(48, 1000.0), _level(64, 1300.0), _level(80, 1270.0), _level(96, 1400.0)]
    flag_levels(levels, tolerance=0.03)
    assert [lv["flags"] for lv in levels[:2]] == [[], []]
    assert levels[2]["flags"] == []  # 1270 is within 3 % of 1300
    assert levels[3]["flags"] == []
    levels[2]["output_tok_s"] = 1200.0
    flag_levels(levels, tolerance=0.03)
    assert levels[2]["flags"] == ["suspected wave cliff or queueing: 1200.0 tok/s at c=80 < 1300.0 tok/s at c=64"]
    flag_levels(levels, tolerance=0.0)
    assert levels[2]["flags"] and not levels[3]["flags"]
    # above the level just below it (1200 at c=80), under the best of all lower ones (1300 at c=64): flagged
    levels[3]["output_tok_s"] = 1250.0
    flag_levels(levels, tolerance=0.03)
    assert levels[3]["flags"] == ["suspected wave cliff or queueing: 1250.0 tok/s at c=96 < 1300.0 tok/s at c=64"]


def test_cliff_flag_with_descending_order_and_failed_levels() -> None:
    levels = [_level(96, 900.0), _level(64, 1000.0), _level(32, 0.0, completed=0, failed=8)]
    flag_levels(levels, tolerance=0.0)
    assert levels[0]["flags"] == ["suspected wave cliff or queueing: 900.0 tok/s at c=96 < 1000.0 tok/s at c=64"]
    assert levels[1]["flags"] == []
    assert levels[2]["flags"] == ["no request completed"]
    part = [_level(8, 500.0, completed=6, failed=2)]
    flag_levels(part, tolerance=0.0)
    assert part[0]["flags"] == ["2 of 8 requests failed (timeout 2)"]


@pytest.mark.parametrize(
    ("changes", "flag"),
    [
        ({"concurrency": ()}, "--concurrency"),
        ({"concurrency": (8, 0)}, "--concurrency"),
        ({"concurrency": (-4,)}, "--concurrency"),
        ({"concurrency": (8, 8)}, "--concurrency"),
        ({"url": "localhost:8000"}, "--url"),
        ({"endpoint": "responses"}, "--endpoint"),
        ({"num_requests": 0}, "--num-requests"),
        ({"warmup": -1}, "--warmup"),
        ({"input_len": 0}, "--input-len"),
        ({"output_len": 0}, "--output-len"),
        ({"timeout": 0.0}, "--timeout"),
        ({"timeout": math.inf}, "--timeout"),
        ({"timeout": math.nan}, "--timeout"),
        ({"cliff_tolerance": 1.0}, "--cliff-tolerance"),
        ({"bucket_s": 0.0}, "--bucket-s"),
        ({"bucket_s": 1e-300}, "--bucket-s"),
        ({"bucket_s": math.inf}, "--bucket-s"),
        ({"bucket_s": math.nan}, "--bucket-s"),
        ({"cliff_tolerance": math.inf}, "--cliff-tolerance"),
        ({"cliff_tolerance": math.nan}, "--cliff-tolerance"),
        ({"temperature": -1.0}, "--temperature"),
        ({"temperature": math.nan}, "--temperature"),
        ({"temperature": math.inf}, "--temperature"),
        ({"out": ""}, "--out"),  # the current directory: a run would write (and first clear) its files there
        ({"out": "  "}, "--out"),
    ],
)
def test_bad_config_names_the_argument(changes: dict[str, Any], flag: str) -> None:
    base: dict[str, Any] = {"url": "http://127.0.0.1:1", "concurrency": (1,)}
    with pytest.raises(UsageError, match=f"^{flag}: "):
        SweepConfig(**{**base, **changes}).validate()


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sweep.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_cli_errors_exit_2_and_name_the_argument(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert sweep.run(_parse("--url", "ftp://x", "--concurrency", "4", "--out", str(tmp_path))) == 2
    assert "--url: " in capsys.readouterr().err
    assert sweep.run(_parse("--url", "http://127.0.0.1:1", "--concurrency", "0")) == 2
    assert "--concurrency: levels must be >= 1" in capsys.readouterr().err
    args = _parse("--url", "http://127.0.0.1:1", "--concurrency", "1", "--extra-body", "[1]")
    assert sweep.run(args) == 2
    assert "--extra-body: must be a JSON object" in capsys.readouterr().err
    # Not an OverflowError traceback from aiohttp on the first request.
    assert sweep.run(_parse("--url", "http://127.0.0.1:1", "--concurrency", "1", "--timeout", "inf")) == 2
    assert "--timeout: must be" in capsys.readouterr().err
    assert sweep.run(_parse("--url", "http://127.0.0.1:1", "--concurrency", "1", "--bucket-s", "inf")) == 2
    assert "--bucket-s: must be a finite number" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        _parse("--url", "http://127.0.0.1:1", "--concurrency")
    assert exc.value.code == 2
    assert "--concurrency" in capsys.readouterr().err


def test_unreachable_server_exits_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with FakeOpenAIServer() as server:
        url = server.url
    args = _parse("--url", url, "--model", "m", "--concurrency", "1", "--out", str(tmp_path), "--quiet")
    assert sweep.run(args) == 3
    assert "--url: cannot connect" in capsys.readouterr().err


def test_unreachable_server_without_model_exits_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # Without --model the first request is GET /v1/models: a dead server is still exit 3, not a --model error.
    with FakeOpenAIServer() as server:
        url = server.url
    assert sweep.run(_parse("--url", url, "--concurrency", "1", "--out", str(tmp_path), "--quiet")) == 3
    assert "--url: cannot connect" in capsys.readouterr().err


def test_help_prints_the_definitions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["sweep", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(E2E - TTFT) / (tokens - 1)" in out
    assert "every gap between consecutive output chunks" in out
    assert "suspected wave cliff or queueing" in out


def test_prompt_file_formats_and_errors(tmp_path: Path) -> None:
    p = tmp_path / "prompts.jsonl"
    p.write_text(
        "plain text prompt\n"
        "\n"
        '"a JSON string"\n'
        '{"prompt": "p", "max_tokens": 7}\n'
        '{"messages": [{"role": "user", "content": "m"}], "tools": [{"type": "function"}]}\n'
    )
    items = sweep.load_prompts(p, "chat")
    assert [it.messages[0]["content"] for it in items if it.messages] == [
        "plain text prompt",
        "a JSON string",
        "p",
        "m",
    ]
    assert items[2].max_tokens == 7 and items[3].tools == ({"type": "function"},)
    with pytest.raises(UsageError, match=r"^--prompts: .*needs 'prompt'"):
        sweep.load_prompts(p, "completions")
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(UsageError, match=r"^--prompts: no prompts"):
        sweep.load_prompts(tmp_path / "empty.txt", "chat")
    with pytest.raises(UsageError, match=r"^--prompts: cannot read"):
        sweep.load_prompts(tmp_path / "missing.txt", "chat")
    (tmp_path / "bad.jsonl").write_text('{"prompt": "x", "max_tokens": 0}\n')
    with pytest.raises(UsageError, match=r"^--prompts: .*bad.jsonl:1: 'max_tokens'"):
        sweep.load_prompts(tmp_path / "bad.jsonl", "chat")
    (tmp_path / "bool.jsonl").write_text('{"prompt": "x", "max_tokens": true}\n')  # JSON true is no token count
    with pytest.raises(UsageError, match=r"^--prompts: .*bool.jsonl:1: 'max_tokens'"):
        sweep.load_prompts(tmp_path / "bool.jsonl", "chat")
    (tmp_path / "latin1.txt").write_bytes("café au lait\n".encode("latin-1"))
    with pytest.raises(UsageError, match=r"^--prompts: .*latin1.txt.*UTF-8"):
        sweep.load_prompts(tmp_path / "latin1.txt", "chat")


def test_extra_body_nested_too_deeply_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"^--extra-body: not valid JSON \(nested too deeply"):
        sweep.parse_extra_body('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")


def test_text_lines_that_json_reads_and_a_byte_order_mark(tmp_path: Path) -> None:
    """Lines JSON reads as a number, true, null or an array are plain-text prompts; a byte-order mark before the
    first line's object does not turn that object into a text prompt."""
    path = tmp_path / "prompts.jsonl"
    path.write_bytes("\ufeff".encode() + b'{"prompt": "p", "max_tokens": 3}\n42\ntrue\nnull\n[1, 2]\n')
    items = sweep.load_prompts(path, "completions")
    assert [it.prompt for it in items] == ["p", "42", "true", "null", "[1, 2]"] and items[0].max_tokens == 3


def test_prompt_line_nested_too_deeply_names_the_line(tmp_path: Path) -> None:
    # json.loads raises RecursionError there, not the ValueError that makes a line plain text: a traceback before
    path = tmp_path / "deep.jsonl"
    path.write_text('"fine"\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(UsageError, match=r"^--prompts: .*deep.jsonl:2: JSON nested too deeply"):
        sweep.load_prompts(path, "chat")


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_sweep_counts_faults_per_level_and_never_crashes(tmp_path: Path) -> None:
    # Every 4th request fails in one of six ways; reasoning and tool-call deltas count as output.
    faults = Faults(every=4, kinds=("http500", "garbage", "disconnect", "hang", "error_event", "no_finish"))
    faults.reasoning_tokens, faults.hang_s = 3, 5.0
    cfg = SweepConfig(
        url="",
        concurrency=(2, 6),
        num_requests=24,
        warmup=2,
        input_len=8,
        output_len=8,
        timeout=0.5,
        out=str(tmp_path / "out"),
        plot=False,
        save_requests=True,
    )
    with FakeOpenAIServer(faults) as server:
        doc = sweep.run_sweep(SweepConfig(**{**cfg.__dict__, "url": server.url}))
        injected = dict(server.stats.faults)
    assert doc["status"] == "complete" and doc["config"]["model"] == "fake-model"
    assert sum(injected.values()) > 0
    failed = 0
    for lv in doc["levels"]:
        assert lv["requests"] == 24
        assert lv["completed"] + lv["failed"] == 24
        assert set(lv["errors"]) <= {"http_500", "malformed_sse", "disconnect", "timeout", "server_error", "incomplete"}
        assert sum(lv["errors"].values()) == lv["failed"]
        assert lv["output_tokens"]["mean"] == pytest.approx(8.0)  # usage: 3 reasoning + 5 content tokens
        assert lv["usage_source"] == "server"
        assert lv["output_tok_s"] > 0
        failed += lv["failed"]
    assert failed > 0
    rows = _read_csv(tmp_path / "out" / "sweep.csv")
    assert [int(r["concurrency"]) for r in rows] == [2, 6]
    lines = (tmp_path / "out" / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 48 and all("ttft_ms" in json.loads(x) for x in lines)


def test_tool_call_deltas_count_as_output(tmp_path: Path) -> None:
    prompts = tmp_path / "tools.jsonl"
    tool = {"type": "function", "function": {"name": "search_docs", "parameters": {"type": "object"}}}
    prompts.write_text(json.dumps({"messages": [{"role": "user", "content": "find"}], "tools": [tool]}) + "\n")
    with FakeOpenAIServer(Faults(usage=False)) as server:
        cfg = SweepConfig(url=server.url, concurrency=(2,), num_requests=4, warmup=0, prompts=str(prompts))
        doc = sweep.run_sweep(SweepConfig(**{**cfg.__dict__, "out": str(tmp_path / "o"), "plot": False}))
    lv = doc["levels"][0]
    # No usage from the server: the name chunk and three argument fragments are four output chunks.
    assert lv["completed"] == 4 and lv["usage_source"] == "chunks"
    assert lv["output_tokens"]["mean"] == pytest.approx(4.0)
    assert lv["ttft_ms"]["n"] == 4


def test_results_survive_a_crash_in_a_later_level(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = sweep.measure_level
    calls = []

    async def crash_on_second(*args: Any, **kwargs: Any) -> LevelRun:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("level blew up")
        return await real(*args, **kwargs)

    monkeypatch.setattr(sweep, "measure_level", crash_on_second)
    out = tmp_path / "crash"
    with FakeOpenAIServer() as server:
        cfg = SweepConfig(url=server.url, concurrency=(2, 4, 8), num_requests=6, warmup=1, output_len=4)
        with pytest.raises(RuntimeError, match="level blew up"):
            sweep.run_sweep(SweepConfig(**{**cfg.__dict__, "out": str(out)}))
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["status"].startswith("aborted: RuntimeError: level blew up")
    assert [lv["concurrency"] for lv in doc["levels"]] == [2]
    assert doc["levels"][0]["completed"] == 6
    assert [r["concurrency"] for r in _read_csv(out / "sweep.csv")] == ["2"]
    assert (out / "sweep.png").stat().st_size > 0


def test_nan_never_reaches_json(tmp_path: Path) -> None:
    # One-token answers: TPOT and per-user rate are undefined and must be written as null.
    with FakeOpenAIServer() as server:
        cfg = SweepConfig(url=server.url, concurrency=(1,), num_requests=3, warmup=0, output_len=1)
        sweep.run_sweep(SweepConfig(**{**cfg.__dict__, "out": str(tmp_path), "plot": False}))
    text = (tmp_path / "sweep.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    lv = json.loads(text)["levels"][0]
    assert lv["tpot_ms"]["n"] == 0 and lv["tpot_ms"]["mean"] is None


@pytest.mark.serving
def test_real_server_sweep_4_levels_x_64_requests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = shared_server()
    out = tmp_path / "real"
    argv = ["sweep", "--url", server.url, "--model", server.model, "--concurrency", "1", "8", "32", "64"]
    argv += ["--num-requests", "64", "--warmup", "8", "--input-len", "16", "--output-len", "8", "--out", str(out)]
    argv += ["--timeout", "120", "--quiet", "--save-requests"]
    assert cli.main(argv) == 0, server.log_tail()
    table = capsys.readouterr().out
    assert "out tok/s" in table
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["status"] == "complete"
    assert set(doc["definitions"]) >= {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "output_tok_s", "tok_s_per_user"}
    assert [lv["concurrency"] for lv in doc["levels"]] == [1, 8, 32, 64]
    rows = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    for lv in doc["levels"]:
        assert lv["requests"] == 64 and lv["completed"] == 64, lv["errors"]
        assert lv["usage_source"] == "server"
        assert lv["output_tokens"]["mean"] == pytest.approx(8.0)  # special tokens are suppressed in the model
        # ITL is per chunk, and a server may hold back a token that decodes to no text yet or send several tokens
        # in one chunk (transformers 5.25 sends fewer chunks than tokens): the gaps are each request's chunks less one.
        chunks = [r["chunks"] for r in rows if r["concurrency"] == lv["concurrency"]]
        assert len(chunks) == 64 and all(1 <= c <= 8 for c in chunks), chunks
        assert lv["output_tok_s"] > 0 and lv["ttft_ms"]["n"] == 64 and lv["itl_ms"]["n"] == sum(c - 1 for c in chunks)
        assert lv["ttft_ms"]["median"] <= lv["e2e_ms"]["median"]
        # Every measured token arrives inside the window, plus whatever the other requests streamed.
        assert lv["output_tokens_in_window"] >= 64 * 8 - 1e-6
        assert not math.isnan(lv["tok_s_per_user"]["median"])
    # The server generates one request at a time, so time to first token grows with the queue.
    assert doc["levels"][-1]["ttft_ms"]["median"] > doc["levels"][0]["ttft_ms"]["median"]
    assert len(_read_csv(out / "sweep.csv")) == 4
    png = (out / "sweep.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def _previous_results(out: Path) -> dict[str, bytes]:
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "sweep.json": b'{"status": "complete", "levels": [{"concurrency": 8}]}\n',
        "sweep.csv": b"concurrency\n8\n",
        "requests.jsonl": b'{"concurrency": 8}\n',
        "sweep.png": b"\x89PNG\r\n\x1a\nearlier",
    }
    for name, data in files.items():
        (out / name).write_bytes(data)
    return files


@pytest.mark.parametrize("server_state", ["down", "rejects-first-request"])
def test_a_sweep_that_cannot_start_keeps_the_previous_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server_state: str
) -> None:
    """A sweep that fails before its first level is measured (server down, first request rejected) leaves the
    results of the run before it in --out as they were."""
    out = tmp_path / "out"
    before = _previous_results(out)
    with FakeOpenAIServer(Faults(every=1, kinds=("http500",))) as server:
        url = server.url
        if server_state == "rejects-first-request":
            argv = ["--url", url, "--concurrency", "2", "--out", str(out), "--quiet", "--save-requests"]
            assert sweep.run(_parse(*argv)) == 3
    if server_state == "down":
        argv = ["--url", url, "--concurrency", "2", "--out", str(out), "--quiet", "--save-requests"]
        assert sweep.run(_parse(*argv)) == 3
    assert "wavemla sweep: error: " in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_sweep_replaces_the_previous_results(tmp_path: Path) -> None:
    """Once a level is measured the run's own files replace the earlier ones; no earlier requests.jsonl or sweep.png
    is left beside results that did not write one."""
    out = tmp_path / "out"
    _previous_results(out)
    with FakeOpenAIServer() as server:
        cfg = SweepConfig(url=server.url, concurrency=(2,), num_requests=2, warmup=0, output_len=4)
        sweep.run_sweep(SweepConfig(**{**cfg.__dict__, "out": str(out), "plot": False}))
    assert sorted(p.name for p in out.iterdir()) == ["sweep.csv", "sweep.json"]
    assert json.loads((out / "sweep.json").read_text())["status"] == "complete"
    assert [r["concurrency"] for r in _read_csv(out / "sweep.csv")] == ["2"]
