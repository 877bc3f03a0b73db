"""Engines: the language model that turns a prompt (+ an image) into the text of a directive.

What: `LlamaCppEngine` runs a GGUF in-process with llama-cpp-python (vision through an mmproj and
the family's multimodal chat handler; every layer on the GPU when the build offloads);
`OpenAIEngine` posts to any OpenAI-compatible `/v1/chat/completions` endpoint (llama.cpp's
`llama-server`, llama-cpp-python's server, vLLM, SGLang, Ollama) with images as data URIs and the
schema as `response_format`. `make_engine(kind, ...)` builds either.
Why two: one in-process model per env is simplest; 8-16 envs sharing one server get batching and
prefix caching. The HTTP engine sends every request from an asyncio loop shared by the process
(one connection pool per engine, no lock), so N envs' requests reach the server together; the
deadline bounds the whole request (connecting, slow headers, a trickling body), and `cancel()`
(or `close()`) cancels what is in flight without waiting. The in-process engine streams and stops
decoding at the deadline or at `cancel()`. Errors are raised as `EngineError` / `ThinkTimeout`
and turned into fallback directives by the caller
(`metabonk_gym.think.strategist.ModelStrategist`); nothing here is called from the env loop
directly.

>>> make_engine("llama_cpp", model_path="/nonexistent/model.gguf")
Traceback (most recent call last):
...
metabonk_gym.errors.ModelFileNotFoundError: model file not found: /nonexistent/model.gguf (pass model_path= the path of a .gguf file; `python -m metabonk_gym.think.testing DIR` writes a tiny test model)
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures as cf
import contextlib
import io
import json
import os
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.errors import EngineError as EngineError  # re-exported
from metabonk_gym.errors import MetabonkError
from metabonk_gym.errors import ModelFileNotFoundError as ModelFileNotFoundError  # re-exported
from metabonk_gym.errors import ThinkTimeout as ThinkTimeout  # re-exported
from metabonk_gym.think.directive import Directive
from metabonk_gym.think.families import resolve_family
from metabonk_gym.think.models import BadModelFileError, check_gguf

#: Answers larger than this are refused (a directive is a few hundred bytes).
MAX_RESPONSE_BYTES = 1 << 20


@dataclass(frozen=True)
class ThinkRequest:
    """One call: the constant system prompt, the per-call text, an optional PNG, the schema;
    `choices`: the numbered options of the "choice" prompt profile (the answer `{"pick": N}`
    means `choices[N - 1]`), empty when the model writes the directive itself."""

    system: str
    user: str
    schema: dict[str, Any]
    image_png: bytes | None = None
    max_tokens: int = 256
    choices: tuple[Directive, ...] = ()


@dataclass(frozen=True)
class Completion:
    """An engine's raw answer with token counts (None when the engine does not report them);
    `cached_tokens`: prompt tokens the server reused from its cache."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None


def png_bytes(image: np.ndarray) -> bytes:
    """Encode an RGB (H, W, 3) or grayscale (H, W[, 1]) uint8 image as PNG."""
    from PIL import Image

    array = np.asarray(image)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[..., 0]
    buffer = io.BytesIO()
    Image.fromarray(array.astype(np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def data_uri(png: bytes) -> str:
    """A `data:image/png;base64,...` URI, how OpenAI-style APIs take inline images."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def chat_messages(request: ThinkRequest, image: bool) -> list[dict[str, Any]]:
    """OpenAI chat messages: the system prompt first (a constant prefix servers can cache)."""
    if image and request.image_png is not None:
        content: Any = [
            {"type": "image_url", "image_url": {"url": data_uri(request.image_png)}},
            {"type": "text", "text": request.user},
        ]
    else:
        content = request.user
    return [{"role": "system", "content": request.system}, {"role": "user", "content": content}]


class Engine(ABC):
    """Answers `ThinkRequest`s; `vision` says whether images reach the model."""

    name: str = "engine"
    vision: bool = False

    @abstractmethod
    def complete(self, request: ThinkRequest, deadline: float) -> Completion:
        """Answer before `deadline` (a `time.monotonic()` value) or raise `ThinkTimeout`."""

    def cancel(self) -> None:
        """Abandon the requests in flight (their callers get `EngineError` soon), never waiting;
        the engine stays open. A strategist owns its engine, so these are its own requests."""
        return None  # by default a request runs to its deadline (nothing to interrupt it with)

    def close(self) -> None:
        """Release the model or connection."""
        return None  # nothing to release by default

    def describe(self) -> dict[str, Any]:
        """What to log about this engine."""
        return {"engine": self.name, "vision": self.vision}


class LlamaCppEngine(Engine):
    """A GGUF model in this process (llama-cpp-python). See the module docstring.

    Args:
        model_path: the model's .gguf file (`ModelFileNotFoundError` when it does not exist).
        mmproj_path: its vision projector .gguf; given, the engine sends the frame as an image
            through the family's multimodal chat handler (`vision` is True). None: text only.
        chat_handler: the vision family's name (`"auto"` detects it from the file names and GGUF
            metadata, see `metabonk_gym.think.families`); used only with `mmproj_path`.
        n_ctx: context length in tokens (prompt + answer).
        n_gpu_layers: layers offloaded to the GPU; None: all (-1) when llama-cpp-python was
            built with GPU offload, else 0.
        n_threads: CPU threads for decoding and prompt evaluation; None: 1 on machines of up
            to 4 CPUs (on a small shared CPU more threads contend: a 600-token prompt of the
            default model took 48 s with 2 threads and 3 s with 1, see docs/thinking.md), else
            llama-cpp-python's defaults (half the cores decode, all evaluate prompts).
        temperature: sampling temperature (0: greedy, where the seed does not matter).
        seed: the sampler's random seed (llama-cpp-python reads 0, the default, as its
            `LLAMA_DEFAULT_SEED`: a random seed per load).
        verbose: let llama.cpp print its load and timing logs.
        llama_kwargs: passed on to `llama_cpp.Llama` (`n_batch`, `flash_attn`, `logits_all`, ...).
    """

    name = "llama_cpp"

    def __init__(
        self,
        model_path: str | Path,
        mmproj_path: str | Path | None = None,
        chat_handler: str = "auto",
        n_ctx: int = 8192,
        n_gpu_layers: int | None = None,
        n_threads: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
        verbose: bool = False,
        **llama_kwargs: Any,
    ) -> None:
        self.model_path = _existing(model_path, "model")
        try:  # a cut-off or foreign file: one line, not pages of llama.cpp's logs
            check_gguf(self.model_path)
        except BadModelFileError as exc:
            raise EngineError(f"llama-cpp-python could not load the model: {exc}") from exc
        self.mmproj_path = _existing(mmproj_path, "mmproj") if mmproj_path is not None else None
        try:
            import llama_cpp
            from llama_cpp import llama_chat_format
        except ImportError as exc:  # pragma: no cover - the think extra installs it
            raise MetabonkError(
                "engine='llama_cpp' needs llama-cpp-python: pip install 'metabonk-gym[think]'"
            ) from exc
        self.family: str | None = None
        handler = None
        if self.mmproj_path is not None:
            family = resolve_family(self.model_path, self.mmproj_path, chat_handler)
            self.family = family.name
            handler_cls = getattr(llama_chat_format, family.handler)
            handler = handler_cls(clip_model_path=str(self.mmproj_path), verbose=verbose)
            _route_mtmd_logs()
        if n_gpu_layers is None:
            n_gpu_layers = -1 if llama_cpp.llama_supports_gpu_offload() else 0
        if n_threads is None and (os.cpu_count() or 1) <= 4:
            n_threads = 1
            llama_kwargs.setdefault("n_threads_batch", 1)
        self.n_gpu_layers = n_gpu_layers
        self.temperature = float(temperature)
        self.vision = handler is not None
        self._lock = threading.Lock()
        self._cancels = 0  # `cancel()` calls so far; a request stops when the count moves
        try:
            self.llm = llama_cpp.Llama(
                model_path=str(self.model_path),
                chat_handler=handler,
                n_ctx=n_ctx,
                n_gpu_layers=n_gpu_layers,
                n_threads=n_threads,
                seed=seed,
                verbose=verbose,
                **llama_kwargs,
            )
        except ValueError as exc:
            raise EngineError(f"llama-cpp-python could not load {self.model_path}: {exc}") from exc
        # llama.cpp asks this between the nodes of every graph it computes, so a long prompt's
        # evaluation stops at the deadline too (llama_decode then returns 2; Llama.eval drops
        # the unfinished batch from the KV cache on the next call). The ctypes callback is kept
        # on self: freed, llama.cpp would call into released memory.
        self._abort_at = float("inf")  # the deadline of the request in flight
        self._abort_cancels = self._cancels
        self._abort_callback = llama_cpp.ggml_abort_callback(self._should_abort)
        llama_cpp.llama_set_abort_callback(self.llm._ctx.ctx, self._abort_callback, None)

    def _should_abort(self, _data: Any) -> bool:
        return time.monotonic() > self._abort_at or self._cancels != self._abort_cancels

    def complete(self, request: ThinkRequest, deadline: float) -> Completion:
        # Streamed so decoding can stop at the deadline between two tokens (an exception raised
        # in a logits processor is swallowed by the ctypes sampler callback); prompt evaluation
        # stops inside llama.cpp through the abort callback. `cancel()` stops both the same way.
        cancels = self._cancels
        with self._lock:
            if time.monotonic() > deadline:
                raise ThinkTimeout("the deadline passed before the model was free")
            self._abort_at, self._abort_cancels = deadline, cancels
            pieces: list[str] = []
            prompt_tokens: int | None = None
            cached: int | None = None
            previous = list(self.llm.input_ids[: self.llm.n_tokens])  # the KV cache's tokens
            try:
                stream: Any = self.llm.create_chat_completion(
                    messages=chat_messages(request, self.vision),  # type: ignore[arg-type]
                    response_format={"type": "json_object", "schema": request.schema},
                    max_tokens=request.max_tokens,
                    temperature=self.temperature,
                    stream=True,
                )
                for chunk in stream:
                    if prompt_tokens is None:  # the first chunk comes right after the prompt
                        prompt_tokens = int(self.llm.n_tokens)
                        cached = _common_prefix(previous, self.llm.input_ids[:prompt_tokens])
                    delta = chunk["choices"][0].get("delta") or {}
                    if delta.get("content"):
                        pieces.append(delta["content"])
                    if time.monotonic() > deadline:
                        stream.close()
                        raise ThinkTimeout(
                            f"decoding stopped at the deadline after {len(pieces)} tokens"
                        )
                    if self._cancels != cancels:
                        stream.close()
                        raise EngineError(f"cancelled after {len(pieces)} tokens")
            except EngineError:
                raise
            except Exception as exc:
                if "llama_decode returned 2" in str(exc):  # the abort callback stopped it
                    if self._cancels != cancels:
                        raise EngineError("cancelled while evaluating the prompt") from None
                    raise ThinkTimeout(
                        f"stopped at the deadline while evaluating the prompt "
                        f"({self.llm.n_tokens} tokens in the cache)"
                    ) from None
                raise EngineError(f"llama-cpp-python failed: {type(exc).__name__}: {exc}") from exc
            finally:
                self._abort_at = float("inf")
        return Completion("".join(pieces), prompt_tokens, len(pieces), cached)

    def cancel(self) -> None:
        """Stop the request in flight: its prompt evaluation inside llama.cpp, or its decoding
        at the next token."""
        self._cancels += 1

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is not None:
            with self._lock:
                llm.close()
            self.llm = None  # type: ignore[assignment]

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "model": str(self.model_path),
            "mmproj": str(self.mmproj_path) if self.mmproj_path else None,
            "family": self.family,
            "n_gpu_layers": self.n_gpu_layers,
            "vision": self.vision,
        }


class _EventLoop:
    """The process's asyncio loop, on one daemon thread, where every `OpenAIEngine` request
    runs: many envs in one process share it, and a forked worker starts its own."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _pid = -1

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._pid != os.getpid() or cls._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=run, name="metabonk-http", daemon=True).start()
                ready.wait(10.0)
                cls._loop, cls._pid = loop, os.getpid()
            return cls._loop


class OpenAIEngine(Engine):
    """An OpenAI-compatible chat endpoint over HTTP. See the module docstring.

    Args:
        base_url: the server's URL (`/v1` is appended when missing).
        model: the model name sent with each request (llama.cpp's servers ignore it).
        api_key: sent as a bearer token; default: the environment's METABONK_API_KEY, else
            OPENAI_API_KEY (keeps the key out of configs and `env.spec`), else none.
        vision: send the frame as an image (the server needs a vision projector).
        temperature: sampling temperature (0: greedy).
        response_format: `"json_object"` sends `{"type": "json_object", "schema": ...}` (llama.cpp's
            and llama-cpp-python's servers); `"json_schema"` sends OpenAI's `{"type":
            "json_schema", "json_schema": {...}}` (vLLM, SGLang, Ollama, OpenAI); `"none"` sends no
            constraint (the answer is still parsed and validated).
        cache_prompt: ask the server to keep the prompt's KV cache in its slot (llama.cpp's
            `cache_prompt`, so the constant system prompt is evaluated once per slot); default:
            on with `"json_object"` (llama.cpp's dialect), off otherwise (strict OpenAI APIs
            refuse unknown fields).
        max_connections: size of this engine's connection pool.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        model: str = "default",
        api_key: str | None = None,
        vision: bool = False,
        temperature: float = 0.0,
        response_format: str = "json_object",
        cache_prompt: bool | None = None,
        max_connections: int = 16,
    ) -> None:
        if response_format not in ("json_object", "json_schema", "none"):
            raise ValueError(
                f"response_format must be 'json_object', 'json_schema' or 'none', not {response_format!r}"
            )
        if not str(base_url).lower().startswith(("http://", "https://")):
            raise EngineError(
                f"base_url {base_url!r} is not an http:// or https:// URL of an "
                "OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1)"
            )
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.model = model
        self.vision = bool(vision)
        self.temperature = float(temperature)
        self.response_format = response_format
        self.cache_prompt = (
            response_format == "json_object" if cache_prompt is None else cache_prompt
        )
        self.max_connections = int(max_connections)
        if api_key is None:
            api_key = os.environ.get("METABONK_API_KEY") or os.environ.get("OPENAI_API_KEY")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client: Any = None  # an httpx.AsyncClient, made on the loop at the first request
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._in_flight: set[cf.Future[Completion]] = set()
        self._lock = threading.Lock()  # guards `_in_flight`, `_cancels`; never held waiting
        self._cancels = 0  # `cancel()` calls so far: a request sent meanwhile is cancelled too
        self._closed = False

    def _payload(self, request: ThinkRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(request, self.vision),
            "max_tokens": request.max_tokens,
            "temperature": self.temperature,
        }
        if self.response_format == "json_object":
            payload["response_format"] = {"type": "json_object", "schema": request.schema}
        elif self.response_format == "json_schema":
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "directive", "schema": request.schema, "strict": True},
            }
        if self.cache_prompt:
            payload["cache_prompt"] = True
        return payload

    def complete(self, request: ThinkRequest, deadline: float) -> Completion:
        cancels = self._cancels
        left = deadline - time.monotonic()
        if left <= 0:
            raise ThinkTimeout("the deadline passed before the request was sent")
        if self._closed:
            raise EngineError("the engine is closed")
        future = asyncio.run_coroutine_threadsafe(
            self._post(self._payload(request), left), _EventLoop.get()
        )
        with self._lock:
            self._in_flight.add(future)
            if self._cancels != cancels:  # `cancel()` came while this one was being sent
                future.cancel()
        try:
            # The coroutine ends itself at the deadline; the extra second only covers a loop
            # too busy to notice.
            return future.result(timeout=left + 1.0)
        except EngineError:
            raise
        except cf.CancelledError:
            what = "closed" if self._closed else "cancelled"
            raise EngineError(f"the engine was {what} while the request was in flight") from None
        except TimeoutError:
            future.cancel()
            raise ThinkTimeout(f"no answer from {self.base_url} within the deadline") from None
        finally:
            with self._lock:
                self._in_flight.discard(future)

    def _async_client(self) -> Any:
        """This engine's connection pool, on the running loop (made again after a fork)."""
        import httpx

        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            limits = httpx.Limits(
                max_connections=self.max_connections,
                max_keepalive_connections=self.max_connections,
            )
            self._client = httpx.AsyncClient(headers=self._headers, limits=limits)
            self._client_loop = loop
        return self._client

    async def _post(self, payload: dict[str, Any], left: float) -> Completion:
        import httpx

        url = f"{self.base_url}/chat/completions"
        body = bytearray()
        try:
            async with asyncio.timeout(left):
                client = self._async_client()
                async with client.stream(
                    "POST", url, json=payload, timeout=httpx.Timeout(left)
                ) as response:
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > MAX_RESPONSE_BYTES:
                            raise EngineError(f"{url} sent more than {MAX_RESPONSE_BYTES} bytes")
                    status = response.status_code
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise ThinkTimeout(f"no full answer from {url} within {left:.2f} s") from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            # A server that closes the socket mid-answer shows as either, depending on whether
            # the close or a reset reaches the client first.
            raise EngineError(
                f"{url} closed the connection without a full answer: {type(exc).__name__}: {exc}"
            ) from exc
        except httpx.HTTPError as exc:
            raise EngineError(f"request to {url} failed: {type(exc).__name__}: {exc}") from exc
        if status != 200:
            snippet = bytes(body[:200]).decode("utf-8", "replace")
            raise EngineError(f"{url} answered HTTP {status}: {snippet}")
        return _completion(bytes(body), url)

    def cancel(self) -> None:
        """Cancel the requests in flight (their connections close, so the server can stop
        generating); never waits."""
        with self._lock:
            self._cancels += 1
            in_flight = list(self._in_flight)
        for future in in_flight:
            future.cancel()

    def close(self) -> None:
        """Cancel the requests in flight and close the pool; never waits."""
        self._closed = True
        self.cancel()
        client, loop = self._client, self._client_loop
        self._client = None
        if client is not None and loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is gone (interpreter exit)
                asyncio.run_coroutine_threadsafe(client.aclose(), loop)

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "base_url": self.base_url,
            "model": self.model,
            "vision": self.vision,
        }


def _completion(body: bytes, url: str) -> Completion:
    """A chat completion's text and token counts (llama.cpp's `timings.cache_n`: prompt tokens
    taken from the slot's cache)."""
    try:
        result = json.loads(body)
        text = result["choices"][0]["message"].get("content") or ""
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise EngineError(f"{url} sent a body that is not a chat completion: {exc}") from exc
    usage = result.get("usage") or {}
    timings = result.get("timings") or {}
    details = usage.get("prompt_tokens_details") or {}
    cached = timings.get("cache_n", details.get("cached_tokens"))
    return Completion(
        str(text),
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
        int(cached) if isinstance(cached, int | float) else None,
    )


def _common_prefix(a: Any, b: Any) -> int:
    """How many tokens two sequences share from the start: what llama-cpp-python keeps of its
    KV cache (it evaluates only the rest; one token less when all match, to get logits).

    >>> _common_prefix([1, 2, 3], [1, 2, 4, 5]), _common_prefix([1, 2], [1, 2])
    (2, 1)
    """
    n = 0
    for x, y in zip(a, b):
        if int(x) != int(y):
            break
        n += 1
    return n - 1 if n and n == len(b) else n


def _route_mtmd_logs() -> None:
    """Send libmtmd's logs through llama-cpp-python's logger, which honours `verbose`: by
    default libmtmd prints every prompt it tokenises to stderr."""
    import ctypes

    try:
        from llama_cpp import mtmd_cpp
        from llama_cpp._logger import llama_log_callback

        mtmd_cpp.mtmd_log_set(llama_log_callback, ctypes.c_void_p(0))
        mtmd_cpp.mtmd_helper_log_set(llama_log_callback, ctypes.c_void_p(0))
    except (ImportError, AttributeError):  # another llama-cpp-python version: leave them be
        pass


def make_engine(kind: str, **kwargs: Any) -> Engine:
    """`"llama_cpp"` (model_path=, mmproj_path=, chat_handler=, ...) or `"openai"` (base_url=,
    model=, api_key=, vision=, ...)."""
    if kind == "llama_cpp":
        if kwargs.get("model_path") is None:
            raise MetabonkError("engine='llama_cpp' needs model_path= the path of a .gguf file")
        return LlamaCppEngine(**kwargs)
    if kind == "openai":
        return OpenAIEngine(**kwargs)
    raise ValueError(f"engine must be 'llama_cpp' or 'openai', not {kind!r}")


def _existing(path: str | Path, what: str) -> Path:
    resolved = Path(path).expanduser()
    if not resolved.is_file():
        hint = (
            "pass model_path= the path of a .gguf file; `python -m metabonk_gym.think.testing DIR` "
            "writes a tiny test model"
            if what == "model"
            else "pass mmproj_path= the vision projector .gguf that belongs to the model"
        )
        raise ModelFileNotFoundError(f"{what} file not found: {resolved} ({hint})")
    return resolved
