"""Judge throughput: N judge calls at a fixed server latency L with judge concurrency C.

The fake OpenAI-compatible server (tests/support/llm_server.py) runs in a subprocess so
its CPU is not counted. The calls go through the real scorer pipeline when
``scorers.create_scorer`` exists (a scorer with one prompt step: generate_score), else
through ``scorers._judge.execute_judge_call``; both use litellm for routing, errors and
cost. Prints wall time, the ideal N*L/C, efficiency = ideal / wall, and process CPU ms
per judge call.

    .venv/bin/python bench/judge_throughput.py --n 2000 --latency-ms 100 --concurrency 64
    .venv/bin/python bench/judge_throughput.py --profile  # adds a cProfile summary
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "support" / "llm_server.py"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def start_server(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline().strip())
    return proc, f"http://127.0.0.1:{port}"


def build_call(url: str, pipeline: str, concurrency: int) -> Any:
    from scorers import Judge  # type: ignore[attr-defined]

    judge = Judge(model="openai/gpt-4o-mini", instructions="You are an expert evaluator.",
                  model_settings={"api_base": url + "/v1", "api_key": "bench-key"})
    if pipeline == "scorer":
        from scorers import create_scorer  # type: ignore[attr-defined]

        scorer = create_scorer(id="bench", description="bench", judge=judge).generate_score(
            description="score it", create_prompt=lambda run: f"Score this answer: {run.output}"
        )

        async def call(i: int) -> Any:
            return await scorer.run(input=f"question {i}", output=f"answer {i}")

        return call
    if pipeline == "litellm":  # the baseline: plain litellm.acompletion, bounded by a semaphore
        import litellm

        limit = asyncio.Semaphore(concurrency)

        async def call_litellm(i: int) -> Any:
            async with limit:
                return await litellm.acompletion(
                    model=judge.model, num_retries=0, max_retries=0,
                    messages=[{"role": "system", "content": judge.instructions},
                              {"role": "user", "content": f"Score this answer {i}"}],
                    **(judge.model_settings or {}))

        return call_litellm
    from scorers._judge import execute_judge_call

    schema = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}

    async def call_direct(i: int) -> Any:
        return await execute_judge_call(judge, f"Score this answer {i}", output_schema=schema)

    return call_direct


async def run(n: int, concurrency: int, url: str, pipeline: str,
              profiler: cProfile.Profile | None = None) -> tuple[float, float]:
    from scorers._judge import set_judge_concurrency
    from scorers._judge_transport import aclose_judge_clients

    set_judge_concurrency(concurrency)
    call = build_call(url, pipeline, concurrency)
    for i in range(min(concurrency, 8)):  # warm up: imports, routes, connections
        await call(i)
    if profiler:
        profiler.enable()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    results = await asyncio.gather(*(call(i) for i in range(n)))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    if profiler:
        profiler.disable()
    assert len(results) == n
    await aclose_judge_clients()
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--pipeline", choices=["auto", "scorer", "judge", "litellm"], default="auto")
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    args = parser.parse_args()
    pipeline = args.pipeline
    if pipeline == "auto":
        import scorers

        pipeline = "scorer" if hasattr(scorers, "create_scorer") else "judge"
    proc, url = start_server(args.latency_ms)
    try:
        profiler = cProfile.Profile() if args.profile else None
        wall, cpu = asyncio.run(run(args.n, args.concurrency, url, pipeline, profiler))
    finally:
        proc.terminate()
        proc.wait()
    ideal = args.n * args.latency_ms / 1000 / args.concurrency
    print(f"pipeline={pipeline} n={args.n} latency_ms={args.latency_ms:g} "
          f"concurrency={args.concurrency}")
    print(f"wall {wall:.2f} s  ideal {ideal:.2f} s  efficiency {ideal / wall:.2f}  "
          f"cpu/call {cpu * 1000 / args.n:.2f} ms")
    if profiler:
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(20)
        stats.sort_stats("cumulative").print_stats(r"scorers|litellm", 20)


if __name__ == "__main__":
    main()
