"""Forward-pass speed of the app's attention kernel against torch SDPA and naive attention.

On a GPU: TFLOP/s (``4 * batch * heads * n^2 * d_head``, halved when causal) of the Triton
kernel, of each SDPA backend (flash / efficient / math, the fastest one named) and of naive
materialised attention, for d_head 64 and 128, n = 512 .. 16k, causal and not, fp16 and bf16,
with batch * n = 16k tokens and heads * d_head = 2048; plus peak memory and the kernel's max
error against a float64 reference on one head. Without a GPU it runs a reduced fp32 CPU sweep
(tiled path vs SDPA vs naive, wall clock). Prints a table and writes a CSV; never asserts on time.

    python benchmarks/attention_kernel.py [--quick] [--csv PATH] [--threads N]
        [--n 512,2048,16384] [--dtypes bfloat16,float16] [--json PATH]

``--json`` also writes one summary per shape: the kernel's TFLOP/s as a ratio to the fastest
SDPA backend timed in the same run, beside FlashAttention's published H100 figures for that
shape where the FlashAttention-3 paper has them (:data:`PUBLISHED_H100`).

On a GPU the first call per shape runs the Triton autotuner (36 configs, each compiled once per
dtype / head dim / mask variant), so a full sweep spends minutes compiling before timing.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

import torch

from models.attention import AttentionOptions, attention, choose_backend, naive_attention

ROOT = Path(__file__).resolve().parents[1]
# FlashAttention-3 paper, H100 SXM5, forward, fp16/bf16, TFLOP/s, batch * n = 16k tokens and
# heads * d_head = 2048 (as this sweep): (d_head, causal) -> n -> (FA2, Triton, cuDNN, FA3).
PUBLISHED_H100 = {
    (64, False): {
        512: (282, 340, 335, 333),
        2048: (318, 396, 395, 460),
        16384: (324, 403, 413, 497),
    },
    (128, False): {
        512: (309, 323, 497, 467),
        2048: (362, 389, 617, 625),
        16384: (370, 395, 595, 648),
    },
    (128, True): {
        512: (191, 146, 315, 292),
        2048: (298, 323, 484, 521),
        16384: (335, 378, 539, 616),
    },
}
PUBLISHED_NAMES = ("FA2", "Triton", "cuDNN", "FA3")

DEFAULT_CSV = ROOT / "benchmarks" / "results" / "attention_kernel.csv"
FIELDS = [
    "device",
    "dtype",
    "d_head",
    "n",
    "batch",
    "heads",
    "causal",
    "impl",
    "detail",
    "ms",
    "tflops",
    "peak_mib",
    "max_err_vs_fp64",
    "fastest_sdpa",
]


def sdpa_backends() -> dict:
    """Name -> ``torch.nn.attention.SDPBackend`` for the three SDPA implementations."""
    from torch.nn.attention import SDPBackend

    return {
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "math": SDPBackend.MATH,
    }


def time_ms(fn, cuda: bool, quick: bool) -> float:
    """Median milliseconds of ``fn()``: do_bench on CUDA, perf_counter on CPU."""
    if cuda:
        import triton.testing

        return triton.testing.do_bench(
            fn, warmup=10 if quick else 25, rep=40 if quick else 100, return_mode="median"
        )
    fn()  # warm-up
    times = []
    for _ in range(2 if quick else 5):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def measure(fn, cuda: bool, quick: bool) -> tuple[str, float | None, float | None]:
    """Run ``fn`` once for peak memory, then time it; ``("OOM", None, None)`` when out of memory.

    Returns:
        ``(status, ms, peak_mib)``; status is ``"ok"``, ``"OOM"`` or the error's first line.
    """
    try:
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        fn()
        peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
        return "ok", time_ms(fn, cuda, quick), peak
    except torch.OutOfMemoryError:
        return "OOM", None, None
    except RuntimeError as err:  # an SDPA backend that does not support this input
        return str(err).splitlines()[0][:60], None, None
    finally:
        if cuda:
            torch.cuda.empty_cache()


def kernel_error(q, k, v, causal: bool) -> float:
    """Max |kernel - float64 reference| over batch 0, head 0 (full rows, so exact)."""
    out, _ = attention(q[:1, :1], k[:1, :1], v[:1, :1], AttentionOptions(causal=causal))
    ref, _, _ = naive_attention(q[:1, :1], k[:1, :1], v[:1, :1], AttentionOptions(causal=causal))
    return (out.double() - ref).abs().max().item()


def bench_shape(
    device: str,
    dtype: torch.dtype,
    d: int,
    n: int,
    batch: int,
    heads: int,
    causal: bool,
    quick: bool,
) -> list[dict]:
    """CSV rows for the kernel, each SDPA backend and naive attention on one shape."""
    cuda = device == "cuda"
    gen = torch.Generator(device=device).manual_seed(0)
    q, k, v = (
        torch.randn(batch, heads, n, d, device=device, dtype=dtype, generator=gen) for _ in range(3)
    )
    flops = 4 * batch * heads * n * n * d / (2 if causal else 1)
    base = dict(
        device=device,
        dtype=str(dtype).replace("torch.", ""),
        d_head=d,
        n=n,
        batch=batch,
        heads=heads,
        causal=causal,
    )
    F = torch.nn.functional
    runs = [
        ("kernel", choose_backend(q), lambda: attention(q, k, v, AttentionOptions(causal=causal)))
    ]
    for name, backend in sdpa_backends().items():

        def sdpa(backend=backend):
            from torch.nn.attention import sdpa_kernel

            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        runs.append(("sdpa", name, sdpa))
    runs.append(
        (
            "naive",
            dtype_name(dtype),
            lambda: naive_attention(q, k, v, AttentionOptions(causal=causal), compute_dtype=dtype),
        )
    )
    rows = []
    for impl, detail, fn in runs:
        status, ms, peak = measure(fn, cuda, quick)
        if impl == "kernel" and cuda and status == "ok":
            from models.attention.triton_kernel import _attn_fwd

            detail = f"{detail} {_attn_fwd.best_config}"
        rows.append(
            dict(
                base,
                impl=impl,
                detail=detail if status == "ok" else f"{detail}: {status}",
                ms=ms,
                tflops=flops / (ms * 1e-3) / 1e12 if ms else None,
                peak_mib=peak,
                max_err_vs_fp64=kernel_error(q, k, v, causal) if impl == "kernel" else None,
            )
        )
    timed = [r for r in rows if r["impl"] == "sdpa" and r["ms"] is not None]
    for r in timed:
        r["fastest_sdpa"] = r is min(timed, key=lambda t: t["ms"])
    return rows


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def sweep(cuda: bool, quick: bool, ns: tuple[int, ...] = (), dtypes: tuple[torch.dtype, ...] = ()):
    """Yield ``(dtype, d_head, n, batch, heads, causal)`` for the GPU or the CPU sweep (``ns``
    and ``dtypes`` replace the GPU sweep's own when given)."""
    if cuda:
        dtypes = dtypes or ((torch.bfloat16,) if quick else (torch.float16, torch.bfloat16))
        ns = ns or ((512, 2048) if quick else (512, 1024, 2048, 4096, 8192, 16384))
        for dtype in dtypes:
            for d in (64, 128):
                for n in ns:
                    for causal in (False, True):
                        yield dtype, d, n, 16384 // n, 2048 // d, causal
    else:
        for n in (128, 256) if quick else (128, 256, 512, 1024):
            for causal in (False, True):
                yield torch.float32, 64, n, 1, 4, causal


def fmt(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def print_table(rows: list[dict]) -> None:
    """One line per shape: kernel ms, TFLOP/s of kernel / fastest SDPA / naive, peak MiB, error."""
    print(
        f"{'dtype':>8} {'d':>4} {'n':>6} {'b':>3} {'h':>3} {'causal':>6} | "
        f"{'ms kern':>8} {'kernel':>8} {'sdpa(best)':>18} {'naive':>8} | "
        f"{'MiB kern':>9} {'sdpa':>8} {'naive':>8} | {'err':>8}"
    )
    shapes = {}
    for r in rows:
        shapes.setdefault((r["dtype"], r["d_head"], r["n"], r["causal"]), []).append(r)
    for (dtype, d, n, causal), group in shapes.items():
        kern = next(r for r in group if r["impl"] == "kernel")
        naive = next(r for r in group if r["impl"] == "naive")
        sdpa = [r for r in group if r["impl"] == "sdpa" and r["tflops"] is not None]
        best = next((r for r in sdpa if r.get("fastest_sdpa")), None)
        best_txt = f"{fmt(best['tflops'], '.3g')} ({best['detail']})" if best else "-"
        naive_txt = "OOM" if "OOM" in naive["detail"] else fmt(naive["tflops"], ".3g")
        print(
            f"{dtype:>8} {d:>4} {n:>6} {kern['batch']:>3} {kern['heads']:>3} {causal!s:>6} | "
            f"{fmt(kern['ms'], '.3g'):>8} {fmt(kern['tflops'], '.3g'):>8} {best_txt:>18} "
            f"{naive_txt:>8} | "
            f"{fmt(kern['peak_mib'], '.0f'):>9} {fmt(best and best['peak_mib'], '.0f'):>8} "
            f"{fmt(naive['peak_mib'], '.0f'):>8} | {fmt(kern['max_err_vs_fp64'], '.1e'):>8}"
        )


def shape_summaries(rows: list[dict]) -> list[dict]:
    """Per shape: the kernel's and the fastest SDPA backend's TFLOP/s, their ratio, the
    kernel's error, and the published H100 figures for that shape (None where the paper has
    none)."""
    shapes: dict[tuple, list[dict]] = {}
    for r in rows:
        shapes.setdefault((r["dtype"], r["d_head"], r["n"], r["causal"]), []).append(r)
    out = []
    for (dtype, d, n, causal), group in shapes.items():
        kern = next(r for r in group if r["impl"] == "kernel")
        best = next((r for r in group if r.get("fastest_sdpa")), None)
        published = PUBLISHED_H100.get((d, causal), {}).get(n)
        out.append(
            {
                "dtype": dtype,
                "d_head": d,
                "n": n,
                "causal": causal,
                "kernel_tflops": kern["tflops"],
                "kernel_error_vs_fp64": kern["max_err_vs_fp64"],
                "sdpa_backend": best["detail"] if best else None,
                "sdpa_tflops": best["tflops"] if best else None,
                "kernel_to_sdpa": kern["tflops"] / best["tflops"]
                if best and kern["tflops"]
                else None,
                "published_h100_tflops": dict(zip(PUBLISHED_NAMES, published, strict=True))
                if published
                else None,
            }
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few shapes, fewer repeats")
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="where to write the CSV")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for torch (default: torch's own choice); on a busy "
        "machine 1 thread avoids OpenMP spin-wait noise",
    )
    parser.add_argument("--n", help="sequence lengths of the GPU sweep, e.g. 512,2048,16384")
    parser.add_argument("--dtypes", help="dtypes of the GPU sweep, e.g. bfloat16,float16")
    parser.add_argument("--json", type=Path, help="also write the per-shape summary as JSON")
    args = parser.parse_args(argv)
    ns = tuple(int(x) for x in args.n.split(",")) if args.n else ()
    dtypes = tuple(getattr(torch, x) for x in args.dtypes.split(",")) if args.dtypes else ()
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = torch.cuda.is_available()
    if cuda:
        print(
            f"GPU: {torch.cuda.get_device_name()} | TFLOP/s forward, "
            "4*b*h*n^2*d (halved when causal)"
        )
    else:
        print(
            f"no GPU: CPU sweep (fp32, wall clock, {torch.get_num_threads()} threads); "
            "TFLOP/s = 4*b*h*n^2*d (halved when causal) / time; kernel = tiled PyTorch path"
        )
    rows = []
    for dtype, d, n, batch, heads, causal in sweep(cuda, args.quick, ns, dtypes):
        rows += bench_shape(
            "cuda" if cuda else "cpu", dtype, d, n, batch, heads, causal, args.quick
        )
        if args.json:  # shape by shape: a run stopped early keeps what it measured
            write_json(args.json, rows, cuda)
    print_table(rows)
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with args.csv.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.csv}")
    if args.json:
        for shape in write_json(args.json, rows, cuda)["shapes"]:
            ratio = shape["kernel_to_sdpa"]
            print(
                f"{shape['dtype']} d={shape['d_head']} n={shape['n']} causal={shape['causal']}: "
                f"kernel / {shape['sdpa_backend']} = {'-' if ratio is None else f'{ratio:.2f}'}; "
                f"published H100 {shape['published_h100_tflops']}"
            )
        print(f"wrote {args.json}")


def write_json(path: Path, rows: list[dict], cuda: bool) -> dict:
    """The device, versions and per-shape summaries so far, written to ``path``."""
    import json
    from importlib.metadata import PackageNotFoundError, version

    try:
        triton_version = version("triton")
    except PackageNotFoundError:
        triton_version = None
    summary = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "triton": triton_version,
        "shapes": shape_summaries(rows),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=1, default=str))
    return summary


if __name__ == "__main__":
    main()
