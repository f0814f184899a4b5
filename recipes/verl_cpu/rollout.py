"""A rollout verl drives on CPU: a transformers model behind verl 0.9.1's server-replica interface.

* :class:`TransformersServer` (a Ray actor, no CPUs reserved) holds the policy as a transformers model and answers
  ``generate(prompt_ids, sampling_params, request_id, ...) -> TokenOutput`` as verl's vLLM server does; requests
  that arrive together (a GRPO group, a batch) are generated as one left-padded batch.
* :class:`TransformersReplica` (``RolloutReplicaRegistry``) starts one server per replica.
* :class:`TransformersServerAdapter` (``_ROLLOUT_REGISTRY``) lives in the actor process and sends the actor's
  weights to the server after every update (checkpoint engine backend ``naive``).

Select it with ``actor_rollout_ref.rollout.name=transformers`` (the plugin registers it in every verl process). On
CPU (``VERL_PLATFORM=cpu``, or no GPU) generation runs in float32 on every core the server's process may use
(:func:`server_threads`): Ray sets ``OMP_NUM_THREADS=1`` in an actor started without CPUs, which left the server on
one core. With a GPU it runs on ``cuda`` in the rollout's ``dtype`` (bfloat16 by default): the server reserves no
Ray GPU (the actor's placement group holds it), and Ray leaves ``CUDA_VISIBLE_DEVICES`` alone in such an actor, so
it shares the GPU with the actor (:func:`server_device`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from typing import Any

import ray
import torch
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

logger = logging.getLogger(__name__)
SERVER_NAME = "transformers_server_{rank}"
#: Requests that arrive within this many seconds of each other are generated as one batch.
GATHER_S = 0.05
#: Environment variable that sets the server's torch threads (default: every core the process may run on).
THREADS_ENV = "REARANK_ROLLOUT_THREADS"
#: How often the trainer checks that the rollout server is alive (seconds; ``$REARANK_ROLLOUT_WATCH_S``).
WATCH_S, WATCH_ENV = 10.0, "REARANK_ROLLOUT_WATCH_S"


def server_threads() -> int:
    """The server's torch threads: ``$REARANK_ROLLOUT_THREADS``, else every core in this process's CPU affinity
    (not ``OMP_NUM_THREADS``, which Ray sets to 1 for an actor that reserves no CPUs)."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"{THREADS_ENV}={value!r}: a whole number of threads >= 1")
        return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def server_device(config: Any) -> tuple[str, torch.dtype]:
    """Where the server generates: ``("cpu", float32)`` with the CPU plugin on or without a GPU, else ``cuda`` in
    the rollout config's ``dtype`` (bfloat16 when it names none)."""
    from recipes.verl_cpu.settings import enabled

    if enabled() or not torch.cuda.is_available():
        return "cpu", torch.float32
    return "cuda", getattr(torch, str(_field(config, "dtype") or "bfloat16"))


def _field(config: Any, key: str) -> Any:
    """``config.key`` of an HFModelConfig or of the DictConfig verl may hand over instead; None when absent."""
    try:
        return config.get(key)
    except (AttributeError, KeyError):
        return getattr(config, key, None)


def _sampling(params: dict[str, Any]) -> tuple:
    temperature = float(params.get("temperature", 1.0) or 0.0)
    top_k = int(params.get("top_k", -1) or -1)
    return temperature, float(params.get("top_p", 1.0) or 1.0), top_k, bool(params.get("logprobs"))


class TransformersServer:
    """The policy as a transformers model, answering verl's token-in/token-out ``generate``."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config, self.replica_rank = config, replica_rank
        self.threads = server_threads()
        os.environ["OMP_NUM_THREADS"] = str(self.threads)
        torch.set_num_threads(self.threads)
        torch.manual_seed(int(_field(config, "seed") or 0) + replica_rank)  # as vLLM's per-replica seed
        path = _field(model_config, "local_path") or _field(model_config, "path")
        self.device, dtype = server_device(config)
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="sdpa")
        self.model.to(self.device).eval()
        tokenizer = AutoTokenizer.from_pretrained(_field(model_config, "local_tokenizer_path")
                                                  or _field(model_config, "tokenizer_path") or path)
        eos = self.model.generation_config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self.eos.add(tokenizer.eos_token_id)
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.global_steps: int | None = None
        self.pending: list[tuple[list[int], dict, asyncio.Future]] = []
        self.draining = False
        self.model_lock = threading.Lock()
        print(f"transformers rollout server {replica_rank}: {path} on {self.device} ({dtype}), {self.threads} threads",
              flush=True)

    def _max_tokens(self, params: dict[str, Any], prompt_len: int) -> int:
        for key in ("max_tokens", "max_new_tokens"):
            if key in params:
                return max(1, int(params[key]))
        budget = self.config.prompt_length + self.config.response_length - prompt_len
        return max(1, min(self.config.response_length, budget))

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       **kwargs: Any) -> TokenOutput:
        if kwargs.get("image_data") or kwargs.get("video_data") or kwargs.get("audio_data"):
            raise ValueError("the transformers rollout takes text prompts only")
        future = asyncio.get_running_loop().create_future()
        self.pending.append((list(map(int, prompt_ids)), dict(sampling_params), future))
        if not self.draining:
            self.draining = True
            asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            await asyncio.sleep(GATHER_S)
            while self.pending:
                key = _sampling(self.pending[0][1]) + (self._max_tokens(self.pending[0][1], 0),)
                batch = [p for p in self.pending if _sampling(p[1]) + (self._max_tokens(p[1], 0),) == key]
                self.pending = [p for p in self.pending if p not in batch]
                try:
                    outputs = await asyncio.to_thread(self._generate_batch, [p[0] for p in batch], batch[0][1])
                except Exception as err:  # noqa: BLE001 -- handed to every waiting request
                    for _, _, future in batch:
                        future.set_exception(err)
                    continue
                for (_, _, future), output in zip(batch, outputs, strict=True):
                    future.set_result(output)
        finally:
            self.draining = False

    @torch.no_grad()
    def _generate_batch(self, prompts: list[list[int]], params: dict[str, Any]) -> list[TokenOutput]:
        temperature, top_p, top_k, want_logprobs = _sampling(params)
        width = max(map(len, prompts))
        max_new = min(self._max_tokens(params, len(p)) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, ids in enumerate(prompts):  # left padding: every prompt ends where generation starts
            input_ids[i, width - len(ids):] = torch.tensor(ids)
            attention[i, width - len(ids):] = 1
        sample = temperature > 0
        options = {"do_sample": sample, "max_new_tokens": max_new, "pad_token_id": self.pad,
                   "eos_token_id": sorted(self.eos), "return_dict_in_generate": True, "output_logits": want_logprobs}
        if sample:
            options.update(temperature=temperature, top_p=top_p, top_k=max(0, top_k))
        else:
            options.update(temperature=None, top_p=None, top_k=None)
        with self.model_lock:
            out = self.model.generate(input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device),
                                      **options)
        generated = out.sequences[:, width:]
        outputs = []
        for i in range(len(prompts)):
            tokens = generated[i].tolist()
            ends = [t for t, token in enumerate(tokens) if token in self.eos]
            tokens = tokens[: ends[0] + 1] if ends else tokens
            log_probs = None
            if want_logprobs:
                log_probs = [torch.log_softmax(out.logits[t][i].float(), -1)[token].item()
                             for t, token in enumerate(tokens)]
            outputs.append(TokenOutput(token_ids=tokens, log_probs=log_probs, stop_reason="completed",
                                       extra_fields={"global_steps": self.global_steps}))
        return outputs

    def load_weights(self, weights: dict[str, torch.Tensor]) -> int:
        """Load the actor's weights (HF names); tied weights may be absent. Returns the number of tensors."""
        with self.model_lock:
            missing, unexpected = self.model.load_state_dict(weights, strict=False)
        tied = set(getattr(self.model, "all_tied_weights_keys", None) or getattr(self.model, "_tied_weights_keys",
                                                                                  None) or ())
        missing = [name for name in missing if name not in tied]
        if unexpected or missing:
            raise ValueError(f"weights do not match the rollout model: unexpected {unexpected[:5]}, "
                             f"missing {missing[:5]}")
        return len(weights)

    def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    # the memory and profiling calls verl's replica makes: nothing to release on CPU
    async def wake_up(self, tags: list[str] | None = None) -> None: ...
    async def sleep(self) -> None: ...
    async def clear_kv_cache(self) -> None: ...
    async def release_kv_cache(self) -> None: ...
    async def resume_kv_cache(self) -> None: ...
    async def resume_generation(self) -> None: ...
    async def start_profile(self, **kwargs: Any) -> None: ...
    async def stop_profile(self) -> None: ...

    async def abort_all_requests(self, reject_request: bool = False) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}

    async def alive(self) -> bool:
        return True


def death_line(name: str, error: BaseException) -> str:
    """The one line that ends a run whose rollout server ``name`` died."""
    return (f"rearank: the rollout server {name} died ({type(error).__name__}); ending the run. Its log is in "
            "Ray's session folder (/tmp/ray/session_latest/logs); a common cause is Ray's memory monitor.")


def watch(server: Any, name: str, every_s: float, on_death: Any = None) -> threading.Thread:
    """A daemon thread that asks ``server`` every ``every_s`` seconds whether it is alive. verl does not notice a
    dead rollout server: its requests fail, the groups are dropped and retried, and the run waits forever. When the
    server is gone this prints one line naming it and ends the process (the trainer), so that the run fails."""

    def end(error: BaseException) -> None:
        print(death_line(name, error), file=sys.stderr, flush=True)
        os._exit(1)

    def loop() -> None:
        while True:
            time.sleep(every_s)
            try:
                ray.get(server.alive.remote(), timeout=max(60.0, every_s))
            except ray.exceptions.GetTimeoutError:
                continue  # busy, not dead
            except ray.exceptions.RayActorError as error:
                (on_death or end)(error)
                return

    thread = threading.Thread(target=loop, name=f"watch-{name}", daemon=True)
    thread.start()
    return thread


class TransformersReplica(RolloutReplica):
    """One :class:`TransformersServer` per replica, beside the actor workers (hybrid mode)."""

    def rollout_worker_use_gpu(self) -> bool:
        return False

    async def launch_servers(self) -> None:
        name = SERVER_NAME.format(rank=self.replica_rank)
        server = ray.remote(TransformersServer).options(name=name, num_cpus=0, max_concurrency=self.max_concurrency)
        self.servers = [server.remote(self.config, self.model_config, self.replica_rank)]
        self._server_handle = self.servers[0]
        self._server_address = name
        watch(self._server_handle, name, float(os.environ.get(WATCH_ENV, "") or WATCH_S))


class TransformersServerAdapter(BaseRollout):
    """In the actor process: sends the updated weights to this replica's server."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
        import os

        super().__init__(config, model_config, device_mesh)
        world = (self.config.tensor_model_parallel_size * self.config.data_parallel_size
                 * self.config.pipeline_model_parallel_size)
        rank = int(os.environ.get("RANK", "0"))
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.is_leader = rank % world == 0
        self.server = None
        print(f"transformers rollout adapter: rank {rank}, replica {self.replica_rank}, node "
              f"{ray.get_runtime_context().get_node_id()}", flush=True)

    def _server(self):
        if self.server is None:
            self.server = ray.get_actor(SERVER_NAME.format(rank=self.replica_rank))
        return self.server

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

    @torch.no_grad()
    async def update_weights(self, weights, wire_format: str = "named_tensors", global_steps: int | None = None,
                             peft_config: Any = None, **kwargs: Any) -> None:
        if wire_format != "named_tensors":
            raise ValueError(f"the transformers rollout takes full named tensors, not {wire_format!r}")
        if peft_config is not None:
            raise ValueError("the transformers rollout takes merged weights: set actor_rollout_ref.model.lora.merge=true")
        state = {}
        for name, tensor in weights:  # every rank takes part in gathering a sharded tensor
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            if self.is_leader:
                state[name] = tensor.detach().to("cpu", copy=True)
        if not self.is_leader:
            return
        try:
            await self._server().load_weights.remote(state)
            if global_steps is not None:
                await self._server().set_global_steps.remote(global_steps)
        except ray.exceptions.RayActorError as error:  # died between two polls of its watch
            line = death_line(SERVER_NAME.format(rank=self.replica_rank), error)
            print(line, file=sys.stderr, flush=True)
            raise RuntimeError(line) from None
