"""A real OpenAI-compatible server for the serving-tool tests: ``transformers serve`` with a tiny random model.

The model (a 2-layer Llama, hidden size 32) and its word-level tokenizer are created here from a fixed seed and
saved to a temporary directory, so nothing is downloaded. The server runs in a subprocess on 127.0.0.1 and
generates one request at a time (no continuous batching), so greedy outputs are the same at any concurrency:
``wavemla check`` must report no corruption against it.

Run as a script to serve by hand::

    python tests/tools/tiny_transformers_server.py --dir /tmp/tiny --port 8011
"""

from __future__ import annotations

import argparse
import atexit
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

_WORDS = tuple(
    " ".join(
        (
            "the a of to and in is it you that he was for on are with as his they be at one have this",
            "from or had by word but what some we can out other were all there when up use your how",
            "said an each she which do their time if will way about many then them write would like so",
            "these her long make thing see him two has look more day could go come did number sound no",
            "most people my over know water than call first who may down side been now find weather",
            "city paris tokyo search docs query result temperature celsius tool json",
        )
    ).split()
)

CHAT_TEMPLATE = (
    "{% if tools %}tools {% for t in tools %}{{ t.function.name }} {% endfor %}{% endif %}"
    "{% for m in messages %}{{ m.role }} {{ m.content }} {% endfor %}"
    "{% if add_generation_prompt %}assistant{% endif %}"
)


def save_tokenizer(out_dir: Path) -> int:
    """Save the word-level tokenizer with its chat template to ``out_dir``; returns its vocabulary size. Ids 0, 1
    and 2 are ``<unk>``, ``<s>`` and ``</s>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>"]
    words = list(dict.fromkeys([*_WORDS, *(f"w{i}" for i in range(100))]))
    vocab = {tok: i for i, tok in enumerate(specials + ["\u2581" + w for w in words])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", chat_template=CHAT_TEMPLATE
    )
    fast.save_pretrained(out_dir)
    return len(vocab)


def build_model(out_dir: Path) -> None:
    """Save a tiny random Llama and the word-level tokenizer with a chat template to ``out_dir``."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=save_tokenizer(out_dir),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(out_dir)
    # Special tokens never come out, so every request streams exactly max_tokens visible words.
    GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=0, suppress_tokens=[0, 1, 2]).save_pretrained(out_dir)


def serve(model_dir: Path, port: int) -> None:
    """Build the model if missing, then run ``transformers serve`` in this process (blocks)."""
    import os

    # The server must never reach a hub: the model is local and no update check may run.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_UPDATE_CHECK"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HOME"] = str(model_dir.parent / "hf-home")
    if not (model_dir / "config.json").exists():
        build_model(model_dir)
    import torch

    # One thread: the test client shares the two cores of a CI machine with this server.
    torch.set_num_threads(1)
    from transformers.cli.transformers import app

    sys.argv = ["transformers", "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port)]
    sys.argv += ["--device", "cpu", "--log-level", "warning"]
    app()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TinyTransformersServer:
    """Start the server in a subprocess and wait until ``/health`` answers; ``stop()`` ends it."""

    def __init__(self, startup_timeout_s: float = 240.0) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="wavemla-tiny-server-")
        self.model_dir = Path(self._tmp.name) / "model"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.model = str(self.model_dir)
        self.log_path = Path(self._tmp.name) / "server.log"
        self._log = self.log_path.open("w")
        cmd = [sys.executable, __file__, "--dir", str(self.model_dir), "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"transformers serve exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if json.loads(r.read()).get("status") == "ok":
                        break
            except (urllib.error.URLError, OSError, ValueError):
                time.sleep(0.5)
        else:
            self.stop()
            raise RuntimeError(f"transformers serve not healthy after {startup_timeout_s:g} s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self._log.close()
        self._tmp.cleanup()


_shared: TinyTransformersServer | None = None


def shared_server() -> TinyTransformersServer:
    """One server per test process, shared by the sweep and check tests, stopped at exit."""
    global _shared
    if _shared is None or _shared.proc.poll() is not None:
        _shared = TinyTransformersServer()
        atexit.register(_shared.stop)
    return _shared


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, type=Path, help="model directory (created if missing)")
    parser.add_argument("--port", required=True, type=int)
    a = parser.parse_args()
    serve(a.dir, a.port)
