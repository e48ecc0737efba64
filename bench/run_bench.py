"""Benchmark of the wave engine: waves to finish, local overhead per request, peak memory.

    python bench/run_bench.py --scale N [--speculate] [--runs 5] [--root DIR] [--keep]

Generates a synthetic dataset of N x 432 cases in the real schema, runs every task of every run
(`stage="all"`) through the simulated provider to completion, and prints ONE JSON line with the
time spent in each part of the engine, the waves it took, peak RSS and the workspace size. Progress
goes to stderr. See bench/README.md for what every number means.

By default the simulated provider runs as a separate process (`python -m lexpilot_batch.simulated`)
reached over loopback HTTP with `--provider env`, so that its memory and CPU are not counted as the
product's; `--simulator in-process` uses `ProviderOptions(provider="simulated")` instead. The
report is built in a child process as well, the way `lexpilot-batch report` runs on a finished
workspace, so its peak memory is measured on its own.

This is a benchmark, not a test: it wraps engine functions from the outside to time them and never
changes what they do.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import functools
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:  # POSIX only; on Windows peak RSS is reported as null
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

BENCHMARK_CASES = 432  # the real LexPilot release
MB = 1024 * 1024
TIMED = ("compile", "submit", "ingest", "advance", "report")


# --- memory --------------------------------------------------------------------------------------


def peak_rss_mb() -> float | None:
    """Peak resident set size of this process so far, in MB (None where getrusage is missing)."""
    if resource is None:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KB, macOS bytes.
    return round(peak / MB if sys.platform == "darwin" else peak / 1024, 1)


def own_peak_rss_mb() -> float | None:
    """Peak RSS of this process's own memory: VmHWM where /proc has it, else `peak_rss_mb()`.

    A child started by `subprocess` inherits its parent's ru_maxrss across exec on Linux, so
    children report VmHWM, which belongs to their own address space.
    """
    return process_peak_rss_mb(os.getpid()) or peak_rss_mb()


def current_rss_mb() -> float | None:
    try:
        with open("/proc/self/statm") as fh:
            return round(int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB, 1)
    except (OSError, ValueError, AttributeError):
        return None


def process_peak_rss_mb(pid: int) -> float | None:
    """VmHWM of another live process (Linux only)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def tree_size(root: Path, exclude: Path | None = None) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        if exclude is not None and Path(dirpath) == exclude.parent and exclude.name in dirnames:
            dirnames.remove(exclude.name)
        for name in filenames:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


# --- synthetic dataset ---------------------------------------------------------------------------

_PEOPLE = ("王某", "李某", "张某", "刘某", "陈某", "杨某", "赵某", "黄某", "周某", "吴某", "某公司", "某物业公司")
_PLACES = ("北京市朝阳区", "上海市浦东新区", "广州市天河区", "杭州市西湖区", "成都市武侯区", "武汉市洪山区")
_THINGS = ("借款", "货款", "工资", "租金", "押金", "定金", "装修款", "医疗费", "误工费", "违约金", "赔偿款", "彩礼")

# Client narrative with concrete facts (dates, amounts, evidence): complete histories.
_FACT_SENTENCES = (
    "{y}年{m}月{d}日，我通过银行转账给{p}{a}万元，转账附言写的是“{t}”。",
    "当时{p}给我写了一张字据，写明{t}{a}万元，约定{m}个月内付清，上面有他的签名和手印。",
    "合同是在{place}签的，一式两份，我手里有一份原件，约定每月{d}日前支付{t}{b}元。",
    "到了{y}年{m}月，{p}开始拖欠，前后一共欠了{a}万元{t}，我手里有微信聊天记录可以证明。",
    "{p}在微信里亲口承认“欠你{a}万我记着”，说等手头宽裕了每个月还{b}元，但后来一分都没还。",
    "我在{place}的单位干了{m}年，每个月工资{b}元，单位一直没给我交社保，也没签书面劳动合同。",
    "事故发生在{y}年{m}月{d}日晚上，交警出具的责任认定书认定{p}负全部责任，我住院{d}天。",
    "住院期间花了医疗费{b}元，都有医院的正规发票，医生出具的诊断证明写着需要休息{m}个月。",
    "房子是{y}年买的，总价{a}万元，首付{b}元是我父母出的，房产证上写的是我们两个人的名字。",
    "我们{y}年登记结婚，{y2}年生了孩子，现在孩子{d}岁，一直跟着我生活，他每月只给{b}元抚养费。",
    "物业公司从{y}年{m}月起每月收物业费{b}元，可小区电梯坏了{d}个月都没人修，我有多次报修记录。",
    "{p}把车停在我家门口的消防通道上，挡了{m}个多月，我报过{d}次警，派出所都有出警记录。",
    "我持有公司{d}%的股权，{y}年{m}月把其中一半以{a}万元转给{p}，对方只付了{b}元就不再付了。",
    "保险合同是{y}年{m}月签的，保额{a}万元，出险后保险公司以告知义务为由拒赔，理赔通知书我保留着。",
    "对方{y}年{m}月{d}日发来的催款函里承认了尚欠{a}万元，这份函件的原件我一直保存着。",
    "除了转账记录，我还有{d}段通话录音，录音里{p}说得很清楚，钱是借的，到期一定还。",
)
# Client narrative without the decisive facts: underspecified histories.
_VAGUE_SENTENCES = (
    "我前几年借给{p}一笔钱，他一直拖着不还，我催了好多次他都找借口。",
    "当时大家关系好，也没想那么多，具体怎么约定的我现在也记不太清了。",
    "他一开始还回消息，说手头紧让我再等等，后来干脆就不理我了。",
    "我觉得他就是故意不还，这口气我咽不下去，想通过法律途径解决。",
    "单位那边一直说会处理，可拖了很久也没个结果，我也不知道该找谁。",
    "事情发生以后对方态度很差，一点赔偿的意思都没有，家里人都很着急。",
    "这件事拖得太久了，我现在每天都睡不好觉，只想尽快把问题解决。",
    "身边的朋友说这种情况打官司肯定能赢，但我心里还是没底。",
    "对方说我没有证据，可我觉得事情明明就是这样的，大家都知道。",
    "我们之间本来是亲戚，闹成这样我也很无奈，但总得有个说法。",
    "{p}那边现在看着过得也不差，就是不愿意给钱，我实在没办法了。",
    "之前也找人调解过一次，没谈拢，对方坚持说不欠我什么。",
)
# Lawyer turns: what the assistant messages of a history say.
_LAWYER_SENTENCES = (
    "您好，根据您的描述，这属于{t}相关的纠纷，我们需要先确认几个关键事实。",
    "请问当时双方有没有签订书面协议或者出具借条、收据之类的凭证？",
    "款项是通过什么方式交付的？如果是银行转账，请保留好转账记录和附言。",
    "对方是否以任何方式承认过这笔债务，比如短信、微信或者录音？",
    "依照法律规定，当事人对自己提出的主张，有责任提供证据加以证明。",
    "诉讼时效一般为三年，从您知道或者应当知道权利受到损害之日起计算。",
    "如果约定的利率超过合同成立时一年期贷款市场报价利率的四倍，超过部分法院不予支持。",
    "建议您先整理好全部证据材料，按时间顺序列一个清单，方便法院审查。",
    "另外，请问对方目前的住所地或者经营地在哪里？这关系到案件的管辖法院。",
    "您主张的各项费用，需要分别提供相应的票据或者计算依据。",
    "如果对方拒不履行生效判决，您还可以申请强制执行。",
    "请问您这边有没有证人能够证明当时的情况？证人是否愿意出庭作证？",
)
_CLAIMS = (
    "判令被告偿还{t}本金{a}万元",
    "判令被告按年利率{r}%支付自{y}年{m}月{d}日起至实际清偿之日止的利息",
    "判令被告支付违约金{b}元",
    "判令被告赔偿各项损失共计{b}元",
    "判令解除双方于{y}年{m}月{d}日签订的合同",
    "判令被告支付拖欠的{t}{b}元",
    "判令被告返还{t}{a}万元",
    "判令被告承担本案诉讼费用",
    "判令被告立即停止侵害并赔礼道歉",
    "判令被告支付精神损害抚慰金{b}元",
)
_FOCAL = (
    "{t}关系是否成立及数额",
    "利息或违约金的计算标准",
    "被告是否存在违约行为",
    "损失的范围和数额",
    "诉讼时效是否已经届满",
    "证据能否证明原告的主张",
    "责任应当如何分担",
)
_DETAILS = (
    "{y}年{m}月{d}日原告向{p}转账{a}万元，附言“{t}”",
    "{p}出具书面凭证一份，载明{t}{a}万元、期限{m}个月",
    "{p}于{y}年{m}月在微信中承认尚欠{a}万元",
    "双方约定每月{d}日前支付{b}元，{p}自{y}年{m}月起未再支付",
    "原告保存有{d}段录音及全部聊天记录原件",
    "交警认定{p}负事故全部责任，原告住院{d}天，花费医疗费{b}元",
)
VERDICTS = ("支持", "部分支持", "驳回")
PLAINTIFF_TYPES = ("自然人", "自然人", "自然人", "法人", "非法人组织")


def _fill(template: str, rng: random.Random) -> str:
    year = rng.randint(2015, 2023)
    return template.format(
        y=year,
        y2=year + rng.randint(1, 3),
        m=rng.randint(1, 12),
        d=rng.randint(1, 28),
        a=rng.randint(1, 300),
        b=rng.randint(500, 99_000),
        r=rng.choice((3.85, 6, 12, 15.4, 24)),
        p=rng.choice(_PEOPLE),
        t=rng.choice(_THINGS),
        place=rng.choice(_PLACES),
    )


class _Corpus:
    """A long text of filled sentences; a message is a run of whole sentences from a random start."""

    def __init__(self, templates: tuple[str, ...], rng: random.Random, chars: int = 120_000) -> None:
        parts, ends, total = [], [], 0
        while total < chars:
            sentence = _fill(rng.choice(templates), rng)
            parts.append(sentence)
            total += len(sentence)
            ends.append(total)
        self.text = "".join(parts)
        self.starts = [0, *ends[:-1]]

    def take(self, rng: random.Random, length: int) -> str:
        limit = bisect.bisect_left(self.starts, len(self.text) - length - 200)
        begin = self.starts[rng.randrange(max(1, limit))]
        end_idx = bisect.bisect_left(self.starts, begin + length)
        end = self.starts[end_idx] if end_idx < len(self.starts) else len(self.text)
        return self.text[begin:end]


def _history(rng: random.Random, n: int, user: _Corpus, lawyer: _Corpus) -> list[dict[str, str]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": (user if i % 2 == 0 else lawyer).take(rng, rng.randint(200, 2000)),
        }
        for i in range(n)
    ]


def make_case(i: int, rng: random.Random, causes: list[str], corpora: dict[str, _Corpus]) -> dict[str, Any]:
    n_focal = rng.randint(1, 3)
    focal = [_fill(t, rng) for t in rng.sample(_FOCAL, n_focal)]
    shape = i % 3  # key_details in all three shapes
    if shape == 0:
        key_details: Any = "；".join(_fill(rng.choice(_DETAILS), rng) for _ in range(rng.randint(2, 4)))
    elif shape == 1:
        key_details = [_fill(rng.choice(_DETAILS), rng) for _ in range(rng.randint(2, 5))]
    else:
        key_details = {
            f: (
                _fill(rng.choice(_DETAILS), rng)
                if rng.random() < 0.4
                else [_fill(rng.choice(_DETAILS), rng) for _ in range(rng.randint(1, 3))]
            )
            for f in focal
        }
    claims = [_fill(t, rng) for t in rng.sample(_CLAIMS, rng.randint(2, 4))]
    n = rng.choice((1, 3, 5, 7, 9))  # odd: the history ends with the client's turn
    return {
        "case_number": f"（{2018 + i % 6}）京{i % 9000 + 100:04d}民初{10_000 + i}号",
        "cause_of_action": causes[i % len(causes)],
        "plaintiff_type": rng.choice(PLAINTIFF_TYPES),
        "focal_point": focal[0] if n_focal == 1 and rng.random() < 0.7 else focal,
        "key_details": key_details,
        "result_dict": {c: rng.choice(VERDICTS) for c in claims},
        "complete_history": _history(rng, n, corpora["facts"], corpora["lawyer"]),
        "underspecified_history": _history(rng, n, corpora["vague"], corpora["lawyer"]),
    }


def generate_dataset(path: Path, cases: int, seed: int = 0) -> None:
    """Write `cases` synthetic cases to `path`, streaming: never the whole dataset in memory."""
    from lexpilot_batch.data import load_categories

    causes = list(load_categories())  # every cause of the bundled mapping, in its order
    rng = random.Random(seed)
    corpora = {
        "facts": _Corpus(_FACT_SENTENCES, rng),
        "vague": _Corpus(_VAGUE_SENTENCES, rng),
        "lawyer": _Corpus(_LAWYER_SENTENCES, rng),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[\n")
        for i in range(cases):
            if i:
                fh.write(",\n")
            fh.write(json.dumps(make_case(i, rng, causes, corpora), ensure_ascii=False))
        fh.write("\n]\n")


# --- timing wrappers -----------------------------------------------------------------------------


class Meter:
    """Accumulates wall time per key and notes which key raised this process's peak RSS."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)  # this process's CPU time: steadier on a busy machine
        self.calls: dict[str, int] = defaultdict(int)
        self.peak_raised_by: dict[str, float] = defaultdict(float)
        self._peak = peak_rss_mb() or 0.0
        self.workspace_peak = 0  # bytes

    def note_peak(self, key: str) -> None:
        peak = peak_rss_mb()
        if peak is not None and peak > self._peak:
            self.peak_raised_by[key] += peak - self._peak
            self._peak = peak

    def wrap(self, fn: Callable, key: str) -> Callable:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[key] += time.perf_counter() - start
                self.cpu[key] += time.process_time() - cpu
                self.calls[key] += 1
                self.note_peak(key)

        return timed

    def wrap_fast(self, fn: Callable, key: str) -> Callable:
        """For functions called once per thread: no RSS check, only time."""
        seconds, cpu_seconds, calls = self.seconds, self.cpu, self.calls
        clock, cpu_clock = time.perf_counter, time.process_time

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start, cpu = clock(), cpu_clock()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[key] += clock() - start
                cpu_seconds[key] += cpu_clock() - cpu
                calls[key] += 1

        return timed


def instrument(meter: Meter) -> None:
    """Wrap the engine's functions where the engine calls them (module globals), timing each part."""
    from lexpilot_batch import batches, compiler, engine
    from lexpilot_batch.protocols import PROTOCOLS

    engine.open_dataset = meter.wrap(engine.open_dataset, "prepare.load_dataset")
    engine.register_run = meter.wrap(engine.register_run, "prepare.register_run")
    engine.add_threads = meter.wrap(engine.add_threads, "prepare.add_threads")
    engine.compile_wave = meter.wrap(engine.compile_wave, "compile_wave")
    engine.check_compiled_files = meter.wrap(engine.check_compiled_files, "submit.verify")
    engine.submit_files = meter.wrap(engine.submit_files, "submit.upload_create")
    engine.poll_files = meter.wrap(engine.poll_files, "poll_files")
    compact = engine.compact_finished_waves

    def measured_compact(ws: Any) -> Any:
        # The workspace is largest just before a finished wave's files are compressed: the next
        # wave's are written by then.
        meter.workspace_peak = max(meter.workspace_peak, tree_size(ws.root, exclude=ws.state_dir / "simulated"))
        return compact(ws)

    engine.compact_finished_waves = meter.wrap(measured_compact, "compact")
    # The provider's own work, which the engine waits for at zero latency and which a real provider
    # does within its latency: the simulated provider answers a batch when it is created, and a
    # chat completion when it is called. Left out of the local time of `time_to_result`.
    from lexpilot_batch.providers.openai_batch import OpenAIBatchBackend
    from lexpilot_batch.providers.sync import SyncRunner

    OpenAIBatchBackend.create = meter.wrap(OpenAIBatchBackend.create, "provider.create")  # type: ignore[method-assign]
    OpenAIBatchBackend.retrieve = meter.wrap(OpenAIBatchBackend.retrieve, "provider.retrieve")  # type: ignore[method-assign]
    SyncRunner.run = meter.wrap(SyncRunner.run, "provider.sync")  # type: ignore[method-assign]
    batches._download = meter.wrap(batches._download, "ingest.download")
    batches.ingest_file = meter.wrap(batches.ingest_file, "ingest.apply")
    compiler._request = meter.wrap_fast(compiler._request, "compile.request_lines")
    compiler._flush = meter.wrap(compiler._flush, "compile.insert_requests")
    for protocol in PROTOCOLS.values():
        # An instance attribute shadows the method: `PROTOCOLS[task].advance(...)` calls this.
        protocol.advance = meter.wrap_fast(protocol.advance, "advance")  # type: ignore[method-assign]


# --- the simulated provider in its own process ---------------------------------------------------


class SimulatorProcess:
    """`python -m lexpilot_batch.simulated` on a free loopback port; its first stdout line is the URL."""

    def __init__(self, state_dir: Path, log_path: Path, faults: str = "none") -> None:
        self.log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lexpilot_batch.simulated",
                "--state-dir",
                str(state_dir),
                "--port",
                "0",
                "--faults",
                faults,
            ],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            self.stop()
            raise RuntimeError(f"the simulated provider did not start; see {log_path}")
        self.peak_rss_mb: float | None = None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.peak_rss_mb = process_peak_rss_mb(self.proc.pid)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


# --- child processes: validation and the report --------------------------------------------------


def child_validate(dataset: Path) -> dict[str, Any]:
    from lexpilot_batch.data import load_dataset

    start = time.perf_counter()
    ds = load_dataset(dataset)
    return {"cases": len(ds), "seconds": round(time.perf_counter() - start, 3), "peak_rss_mb": own_peak_rss_mb()}


def bench_models(k: int) -> list[str]:
    """The evaluated models the bench prepares: bench-eval, then bench-eval-2 ... bench-eval-k."""
    return ["bench-eval", *(f"bench-eval-{i}" for i in range(2, k + 1))]


def child_report(root: Path, profile: str | None = None, html: bool = False) -> dict[str, Any]:
    """Build and render the report of a finished workspace exactly as `lexpilot-batch report` does.

    Calls the CLI's own report function (output captured), with its three parts timed. With `html`,
    then renders `--format html` the same way into `<root>/report.html` (`child_html`).
    """
    import contextlib
    import io

    from lexpilot_batch import report, results
    from lexpilot_batch.cli.reading import print_report

    meter = Meter()
    built: list[dict] = []

    def keep(fn: Callable) -> Callable:
        def kept(*args: Any, **kwargs: Any) -> Any:
            built.append(fn(*args, **kwargs))
            return built[-1]

        return kept

    results.load_run_results = meter.wrap(results.load_run_results, "load_run_results")
    report.build_report = meter.wrap(keep(report.build_report), "build_report")
    report.render = meter.wrap(report.render, "render")
    out = io.StringIO()
    profiler = _start_profiler(profile)
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        print_report(root, None, None, "table", False)
    total = time.perf_counter() - start
    _stop_profiler(profiler, profile)
    return {
        "seconds": round(total, 4),
        "parts": {k: round(v, 4) for k, v in meter.seconds.items()},
        "chars": len(out.getvalue()),
        # Same digest = same metrics and usage: a patched engine must agree with the unpatched one
        # on every number (the code hash shown in the report's settings may differ).
        "digest": _metrics_digest(built[-1]) if built else None,
        # Metrics only: also equal between a run with --speculate and one without.
        "metrics_digest": _metrics_digest(built[-1], usage=False) if built else None,
        "peak_rss_mb": own_peak_rss_mb(),
        "html": child_html(root) if html else None,
    }


def child_html(root: Path) -> dict[str, Any]:
    """`lexpilot-batch report --format html` of the workspace into `<root>/report.html`: seconds, size,
    and, where a Chromium is found, the milliseconds from navigation to the first case on screen
    (the page's `data-ready-ms`), median of three loads."""
    import contextlib
    import io
    import re

    from lexpilot_batch.cli.reading import print_report

    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        print_report(root, None, None, "html", False)
    seconds = time.perf_counter() - start
    page = root / "report.html"
    page.write_text(out.getvalue(), encoding="utf-8")
    result: dict[str, Any] = {"seconds": round(seconds, 3), "mb": round(page.stat().st_size / MB, 2), "ready_ms": None}
    browser = next(
        (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None
    )
    if browser is not None:
        times = []
        for _ in range(3):
            with tempfile.TemporaryDirectory() as profile_dir:
                done = subprocess.run(
                    [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     f"--user-data-dir={profile_dir}", "--dump-dom", page.as_uri()],
                    capture_output=True, text=True, encoding="utf-8", timeout=300,
                )  # fmt: skip
            found = re.search(r'data-ready-ms="(\d+)"', done.stdout)
            if found:
                times.append(int(found.group(1)))
        result["ready_ms"] = sorted(times)[len(times) // 2] if times else None
    return result


def _metrics_digest(built: dict, usage: bool = True) -> str:
    numbers = [
        {"runs": g["runs"], "tasks": g["tasks"], **({"usage": g["usage"]} if usage else {})} for g in built["groups"]
    ]
    blob = json.dumps(numbers, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


class _Child:
    """This script in a child process (`--child-...`); `result()` waits for its JSON line."""

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def result(self) -> dict[str, Any]:
        if not hasattr(self, "_result"):
            out, err = self.proc.communicate()
            if self.proc.returncode != 0:
                raise RuntimeError(f"child {' '.join(self.args)} failed:\n{err[-4000:]}")
            self._result = json.loads(out.strip().splitlines()[-1])
        return self._result


def _run_child(args: list[str]) -> dict[str, Any]:
    return _Child(args).result()


# --- time to result: the latency model applied to a finished workspace ---------------------------

# Tail-sync limits the bench also evaluates on every run (see `time_to_result`).
SWEEP = (0, 100, 250, 500, 1000, 1500, 2000, 3000, 5000)
# Default prices, the same for every role: gpt-4o-mini's list price, USD per 1M tokens.
DEFAULT_PRICE = {"input": 0.15, "output": 0.60}


def makespan(durations: list[float], workers: int) -> float:
    """How long the sync backend takes for requests of these durations, in file order, `workers` at
    a time (`providers.sync.SyncRunner`: each free worker takes the next request)."""
    import heapq

    free = [0.0] * max(1, min(workers, len(durations)))
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free) if durations else 0.0


def time_to_result(ws_root: Path, options: Any, args: argparse.Namespace, local_seconds: float) -> dict[str, Any]:
    """The simulated time to result of a finished workspace, its batch round trips and its cost,
    for the run's own `--tail-sync` and for each limit of `SWEEP`.

    Computed, not slept: each batch takes `simulated.latency.batch_seconds` of its input's hash and
    each chat completion `chat_seconds` of its custom_id, the draws the simulated provider sleeps
    with `--real-time`. A wave takes the longest of its batches, or the sync files run one after the
    other (`batches.poll_files` runs them in turn, each `--concurrency` requests at a time) if that
    is longer; the run takes the sum over its waves plus `local_seconds`: the engine's time measured
    in this run, less the simulated provider's own work (answering a batch when it is created, and
    chat completions), which a real provider does within its latency. Polls are assumed to notice a
    finished batch at once (`--poll-interval` adds up to its length per wave). Tail-sync does not
    change which requests a wave holds, only how each group travels, so every limit of the sweep is
    evaluated on the same waves, with the compiler's rule (`tail_sync.wave_backend`).
    """
    from lexpilot_batch.costs import DEFAULT_BATCH_DISCOUNT, cost_usd
    from lexpilot_batch.providers.session import Session
    from lexpilot_batch.simulated.faults import Faults
    from lexpilot_batch.simulated.latency import batch_seconds, chat_seconds
    from lexpilot_batch.tail_sync import is_round_trip, wave_backend
    from lexpilot_batch.workspace import Workspace

    faults = Faults(latency=args.batch_latency, sync_latency=args.sync_latency, latency_spread=args.latency_spread)
    prices = json.loads(Path(args.prices).read_text(encoding="utf-8")) if args.prices else None
    price_of = (prices or {}).get
    with Workspace(ws_root, writable=False) as ws:
        session = Session(ws, options)  # routes only: nothing is sent
        db = ws.store.conn
        files = [dict(r) for r in db.execute("SELECT * FROM files ORDER BY pk")]
        routes = {f["pk"]: session.file_route(f) for f in files}
        ids: dict[int, list[str]] = defaultdict(list)
        for file_pk, custom_id in db.execute("SELECT file_pk, custom_id FROM requests ORDER BY pk"):
            ids[file_pk].append(custom_id)
        tokens = {
            (r[0], r[1]): (r[2] or 0, r[3] or 0)
            for r in db.execute(
                "SELECT file_pk, role, SUM(prompt_tokens), SUM(completion_tokens) FROM requests"
                " WHERE status != 'pending' GROUP BY file_pk, role"
            )
        }
        session.close()
    batch_s = {f["pk"]: batch_seconds(faults, f["sha256"]) for f in files}
    sync_s = {pk: makespan([chat_seconds(faults, c) for c in cids], args.concurrency) for pk, cids in ids.items()}
    groups: dict[tuple, list[dict]] = defaultdict(list)  # a wave's files of one group, as compiled
    for f in files:
        route = routes[f["pk"]]
        groups[(f["wave"], route.backend, f["endpoint"], f["model"], f["provider"])].append(f)

    def cost(backend_of: dict[int, str]) -> float:
        return sum(
            cost_usd(p, c, price_of(role, DEFAULT_PRICE), backend_of[pk], DEFAULT_BATCH_DISCOUNT) or 0.0
            for (pk, role), (p, c) in tokens.items()
        )

    def evaluate(limit: int) -> dict[str, Any]:
        backend_of = {}
        for group in groups.values():
            backend = wave_backend(routes[group[0]["pk"]], sum(f["n_requests"] for f in group), limit)
            backend_of.update((f["pk"], backend) for f in group)
        waves = []
        for wave in sorted({f["wave"] for f in files}):
            mine = [f for f in files if f["wave"] == wave]
            batched = [f for f in mine if is_round_trip(backend_of[f["pk"]])]
            synced = [f for f in mine if not is_round_trip(backend_of[f["pk"]])]
            seconds = max(max((batch_s[f["pk"]] for f in batched), default=0.0), sum(sync_s[f["pk"]] for f in synced))
            waves.append(
                {
                    "wave": wave,
                    "batch_requests": sum(f["n_requests"] for f in batched),
                    "sync_requests": sum(f["n_requests"] for f in synced),
                    "seconds": round(seconds, 1),
                }
            )
        provider = sum(w["seconds"] for w in waves)
        all_batch = cost({pk: routes[pk].backend for pk in routes})
        spent = cost(backend_of)
        return {
            "tail_sync": limit,
            "batch_round_trips": sum(1 for w in waves if w["batch_requests"]),
            "sync_requests": sum(w["sync_requests"] for w in waves),
            "provider_seconds": round(provider, 1),
            "simulated_seconds": round(provider + local_seconds, 1),
            "cost_usd": round(spent, 4),
            "premium_usd": round(spent - all_batch, 4),
            "premium_pct": round(100 * (spent - all_batch) / all_batch, 1) if all_batch else None,
            "by_wave": waves,
        }

    own = evaluate(args.tail_sync)
    replayed = {pk for group in groups.values() for pk in (f["pk"] for f in group)}
    assert len(replayed) == len(files)
    sweep = [evaluate(limit) for limit in SWEEP]
    for entry in sweep:
        del entry["by_wave"]
    return {
        "model": {
            "batch_latency_s": args.batch_latency,
            "sync_latency_s": args.sync_latency,
            "latency_spread": args.latency_spread,
            "concurrency": args.concurrency,
            "prices": prices or {"every role": DEFAULT_PRICE},
            "batch_discount": DEFAULT_BATCH_DISCOUNT,
            "local_seconds": round(local_seconds, 1),
        },
        **own,
        "sweep": sweep,
    }


# --- compacted versus uncompressed ---------------------------------------------------------------


def check_export(ws_root: Path, scratch: Path) -> dict[str, Any]:
    """Export the finished (compacted) workspace and an uncompressed copy of it, and compare them.

    The copy holds the same database (by SQLite's backup, then its record of compaction cleared),
    the same manifests, and every compacted file expanded back to its plain path: the workspace as
    `--no-compact` would have left it. Both layouts of `export` must be byte-identical and `doctor`
    clean on both; every compacted file is also checked against its recorded hash
    (`compaction.verify`, which reads them all).
    """
    import gzip
    import sqlite3

    from lexpilot_batch import compaction, doctor
    from lexpilot_batch.case_export import export_cases
    from lexpilot_batch.export import export_seed
    from lexpilot_batch.results import load_run_results
    from lexpilot_batch.workspace import Workspace

    start = time.perf_counter()
    copy = scratch / "uncompressed"
    (copy / "state").mkdir(parents=True)
    src = sqlite3.connect(ws_root / "state" / "lexpilot.sqlite3")
    dst = sqlite3.connect(copy / "state" / "lexpilot.sqlite3")
    try:
        src.backup(dst)
        dst.execute("DELETE FROM compacted")
        dst.commit()
    finally:
        src.close()
        dst.close()
    shutil.copytree(ws_root / "runs", copy / "runs")
    expanded = 0
    for folder in ("requests", "responses"):
        for path in (ws_root / folder).rglob("*"):
            if not path.is_file():
                continue
            target = copy / path.relative_to(ws_root)
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.name.endswith(compaction.SUFFIX):
                with (
                    gzip.open(path, "rb") as fh,
                    open(target.with_name(path.name[: -len(compaction.SUFFIX)]), "wb") as out,
                ):
                    shutil.copyfileobj(fh, out, 1 << 20)
                expanded += 1
            else:
                shutil.copyfile(path, target)

    def read(root: Path) -> tuple[list[str], dict[str, str], list[str]]:
        out = scratch / f"export-{root.name}"
        with Workspace(root) as ws:
            findings = [f"{f.severity} {f.kind}: {f.detail}" for f in doctor.diagnose(ws)]
            export_seed(ws, out / "seed")
            export_cases(load_run_results(ws), out / "cases")
            problems = compaction.verify(ws)
        digests = {
            p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*"))
            if p.is_file()
        }
        return findings, digests, problems

    packed = read(ws_root)
    plain = read(copy)
    shutil.rmtree(scratch, ignore_errors=True)
    result = {
        "export_identical": packed[1] == plain[1],
        "exported_files": len(packed[1]),
        "export_digest": hashlib.sha256(json.dumps(packed[1], sort_keys=True).encode()).hexdigest()[:16],
        "doctor": {"compacted": packed[0], "uncompressed": plain[0]},
        "verify_problems": packed[2],
        "files_expanded": expanded,
        "seconds": round(time.perf_counter() - start, 1),
    }
    log(f"export check: {result}")
    return result


# --- profiling -----------------------------------------------------------------------------------


def _start_profiler(path: str | None):
    if not path:
        return None
    from pyinstrument import Profiler  # pip install pyinstrument (a bench-only tool)

    # 1 ms samples; a long (20x) run is sampled every 10 ms to keep the profile itself small.
    profiler = Profiler(interval=float(os.environ.get("BENCH_PROFILE_INTERVAL", "0.001")))
    profiler.start()
    return profiler


def _stop_profiler(profiler, path: str | None) -> None:
    if profiler is None or not path:
        return
    profiler.stop()
    target = Path(path)
    if target.suffix == ".html":
        target.write_text(profiler.output_html(), encoding="utf-8")
    else:
        target.write_text(profiler.output_text(unicode=True, color=False, show_all=False), encoding="utf-8")


# --- the benchmark -------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _clean_provider_env() -> None:
    for key in list(os.environ):
        if key.startswith("LEXPILOT_") and key.endswith(("_BASE_URL", "_API_KEY", "_BACKEND", "_PROFILE")):
            del os.environ[key]
    os.environ.pop("LEXPILOT_SIM_FAULTS", None)


def run(args: argparse.Namespace) -> dict[str, Any]:
    created_root = args.root is None
    root = Path(args.root or tempfile.mkdtemp(prefix="lexpilot-bench-")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    ws_root, sim_dir = root / "workspace", root / "simulator"
    if ws_root.exists() and any(ws_root.iterdir()):
        raise SystemExit(f"{ws_root} is not empty; pass another --root (the bench needs a fresh workspace)")
    n_cases = args.scale * BENCHMARK_CASES
    dataset = Path(args.dataset).resolve() if args.dataset else root / f"dataset-x{args.scale}-s{args.seed}.json"
    made = []
    validation: _Child | None = None
    try:
        if not dataset.exists():
            start = time.perf_counter()
            generate_dataset(dataset, n_cases, args.seed)
            made.append(dataset)
            log(
                f"generated {n_cases} cases, {dataset.stat().st_size / MB:.1f} MB, in "
                f"{time.perf_counter() - start:.1f} s: {dataset}"
            )
        # Validated with load_dataset in a child process, alongside the run (prepare validates the
        # same file again and stops on the same errors), so that it costs neither memory in the
        # measured process nor time on the 1x run's one-minute budget.
        validation = _Child(["--child-validate", str(dataset)])
        if args.compare:
            return _compare(args, dataset, root, validation, made)
        made.append(ws_root)
        if args.simulator == "process":
            made.append(sim_dir)
        result = _bench(args, dataset, ws_root, sim_dir, root, validation)
        if result["cases"] != n_cases and not args.dataset:
            raise SystemExit(f"{dataset} has {result['cases']} cases, expected {n_cases}")
        result["dataset_mb"] = round(dataset.stat().st_size / MB, 1)
        return result
    finally:
        if validation is not None and validation.proc.poll() is None:
            validation.proc.kill()
            validation.proc.communicate()
        if not args.keep:
            for path in made:
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                elif path.exists() and not args.dataset:
                    path.unlink()
            for stray in root.glob("simulator*.log"):
                stray.unlink(missing_ok=True)
            if created_root:
                shutil.rmtree(root, ignore_errors=True)
        else:
            log(f"kept {root}")


# The configurations of `--compare`: (name, --speculate, --tail-sync; None: the one given).
COMPARED = (("no speculation", False, 0), ("speculation", True, 0), ("speculation + tail-sync", True, None))


def _compare(
    args: argparse.Namespace, dataset: Path, root: Path, validation: _Child, made: list[Path]
) -> dict[str, Any]:
    """The same dataset run in each configuration of `COMPARED`, each in a workspace of its own."""
    results = []
    for name, speculate, tail_sync in COMPARED:
        config = argparse.Namespace(
            **{**vars(args), "speculate": speculate, "tail_sync": args.tail_sync if tail_sync is None else tail_sync}
        )
        slug = name.replace(" + ", "-").replace(" ", "-")
        ws_root, sim_dir = root / f"workspace-{slug}", root / f"simulator-{slug}"
        if ws_root.exists() and any(ws_root.iterdir()):
            raise SystemExit(f"{ws_root} is not empty; pass another --root (the bench needs a fresh workspace)")
        made.extend([ws_root, sim_dir])
        log(f"--- {name} (--speculate {speculate}, --tail-sync {config.tail_sync}) ---")
        results.append((name, _bench(config, dataset, ws_root, sim_dir, root, validation)))
    rows = []
    for name, r in results:
        t = r["time_to_result"]
        rows.append(
            {
                "config": name,
                "tail_sync": r["tail_sync"],
                "waves": r["waves"],
                "batch_round_trips": t["batch_round_trips"],
                "sync_requests": t["sync_requests"],
                "requests": r["requests"],
                "simulated_seconds": t["simulated_seconds"],
                "provider_seconds": t["provider_seconds"],
                "cost_usd": t["cost_usd"],
                "premium_pct": t["premium_pct"],
                "local_us_per_request": r["local_us_per_request"],
                "workspace_mb": r["workspace_mb"],
                "metrics_digest": r["metrics_digest"],
            }
        )
    log("config                    waves  batch trips  sync req.  time to result   cost USD  premium")
    for row in rows:
        log(
            f"{row['config']:<25} {row['waves']:>5} {row['batch_round_trips']:>12} {row['sync_requests']:>10} "
            f"{row['simulated_seconds']:>12.0f} s {row['cost_usd']:>10.2f} {row['premium_pct']:>7}%"
        )
    return {
        "compare": rows,
        "same_metrics": len({row["metrics_digest"] for row in rows}) == 1,
        "runs": [r for _, r in results],
    }


def _bench(
    args: argparse.Namespace, dataset: Path, ws_root: Path, sim_dir: Path, root: Path, validation: _Child
) -> dict[str, Any]:
    from lexpilot_batch.config import Settings
    from lexpilot_batch.engine import poll_and_advance, prepare
    from lexpilot_batch.providers.session import ProviderOptions, Session
    from lexpilot_batch.runs import RunSpec
    from lexpilot_batch.workspace import Workspace

    meter = Meter()
    instrument(meter)
    _clean_provider_env()
    simulator = None
    # With --real-time the simulated provider sleeps its latency model; otherwise it answers at once
    # and the time to result is computed from the same model (`time_to_result`).
    faults = (
        f"latency={args.batch_latency},sync_latency={args.sync_latency},latency_spread={args.latency_spread}"
        if args.real_time
        else "none"
    )
    engine_options = {"retries": 3, "tail_sync": args.tail_sync, "concurrency": args.concurrency}
    if args.simulator == "process":
        simulator = SimulatorProcess(sim_dir, root / f"{sim_dir.name}.log", faults)
        os.environ["OPENAI_BASE_URL"] = simulator.base_url
        os.environ["OPENAI_API_KEY"] = "bench-not-a-secret"
        options = ProviderOptions(provider="env", **engine_options)
        log(f"simulated provider (own process, pid {simulator.proc.pid}) at {simulator.base_url}")
    else:
        options = ProviderOptions(provider="simulated", sim_faults=faults, **engine_options)
    run_ids = [f"bench{i + 1}" for i in range(args.runs)]
    profiler = _start_profiler(args.profile)
    wave_log: list[dict[str, Any]] = []
    try:
        started = time.perf_counter()
        with Workspace(ws_root) as ws:
            session = Session(ws, options)
            try:
                mark = time.perf_counter()
                models = tuple(bench_models(args.models))
                spec = RunSpec(tuple(run_ids), models, "all", Settings(), dataset=dataset, speculate=args.speculate)
                prepared = prepare(ws, session, spec)
                log(
                    f"prepared {len(run_ids)} runs of {len(models)} model(s), {prepared.new_threads} threads; "
                    f"wave 1: {prepared.compiled.requests} requests in {len(prepared.compiled.files)} files "
                    f"({time.perf_counter() - mark:.1f} s, RSS {current_rss_mb()} MB, peak {peak_rss_mb()} MB)"
                )
                rounds = 100_000 if args.real_time else 200
                for round_no in range(1, rounds):
                    before = dict(meter.seconds)
                    mark = time.perf_counter()
                    left = poll_and_advance(
                        ws, session, do_submit=True, wait=False, poll_interval=0, compact=not args.no_compact
                    )
                    spent = {
                        k: round(v - before.get(k, 0.0), 2)
                        for k, v in meter.seconds.items()
                        if v - before.get(k, 0.0) > 0.005
                    }
                    wave = ws.store.conn.execute("SELECT MAX(n) FROM waves").fetchone()[0]
                    wave_log.append({"round": round_no, "wave": wave, "seconds": spent})
                    if spent or not args.real_time:
                        log(
                            f"round {round_no}: now at wave {wave}, {time.perf_counter() - mark:.1f} s {spent} "
                            f"RSS {current_rss_mb()} MB, peak {peak_rss_mb()} MB; left {left}"
                        )
                    if left["in_flight"] == 0 and left["unsubmitted"] == 0:
                        break
                    if left["in_flight"]:
                        # latency 0: batches are terminal at once, but be safe
                        time.sleep(args.poll_interval if args.real_time else 0.01)
                else:
                    raise RuntimeError(f"the workspace did not finish in {rounds} rounds")
                engine_seconds = time.perf_counter() - started
                db = ws.store.conn
                counts = {
                    "waves": db.execute("SELECT COUNT(*) FROM waves").fetchone()[0],
                    "requests": db.execute("SELECT COUNT(*) FROM requests").fetchone()[0],
                    "request_status": {
                        r[0]: r[1] for r in db.execute("SELECT status, COUNT(*) FROM requests GROUP BY status")
                    },
                    "thread_status": {
                        r[0]: r[1] for r in db.execute("SELECT status, COUNT(*) FROM threads GROUP BY status")
                    },
                    "files": db.execute("SELECT COUNT(*) FROM files").fetchone()[0],
                }
            finally:
                session.close()
    finally:
        _stop_profiler(profiler, args.profile)
        if simulator is not None:
            simulator.stop()
    engine_peak = peak_rss_mb()
    log(f"engine done in {engine_seconds:.1f} s: {counts}")
    checked = validation.result()
    log(
        f"the dataset validated with load_dataset in {checked['seconds']} s "
        f"(its own process, peak RSS {checked['peak_rss_mb']} MB)"
    )

    report_args = ["--child-report", str(ws_root)] + (["--html"] if args.html else [])
    if args.profile:
        stem = Path(args.profile)
        report_args += ["--profile", str(stem.with_name(stem.stem + "-report" + stem.suffix))]
    reported = _run_child(report_args)
    log(f"report in {reported['seconds']} s {reported['parts']} (peak RSS {reported['peak_rss_mb']} MB)")

    s = meter.seconds
    advance = s["advance"]
    seconds = {
        "compile": s["compile_wave"] - advance,
        "submit": s["submit.verify"] + s["submit.upload_create"],
        "ingest": s["ingest.download"] + s["ingest.apply"],
        "advance": advance,
        "compact": s["compact"],
        "report": reported["seconds"],
    }
    seconds["total"] = engine_seconds + reported["seconds"]
    c = meter.cpu
    cpu_seconds = {
        "compile": c["compile_wave"] - c["advance"],
        "ingest": c["ingest.download"] + c["ingest.apply"],
        "advance": c["advance"],
    }
    requests = counts["requests"]
    per = {k: round(v / requests * 1e6, 1) for k, v in seconds.items()}
    local = seconds["compile"] + seconds["ingest"] + seconds["advance"]
    breakdown = {
        "compile.request_lines": s["compile.request_lines"],
        "compile.insert_requests": s["compile.insert_requests"],
        "compile.other": s["compile_wave"] - advance - s["compile.request_lines"] - s["compile.insert_requests"],
        "submit.verify": s["submit.verify"],
        "submit.upload_create": s["submit.upload_create"],
        "ingest.download": s["ingest.download"],
        "ingest.apply": s["ingest.apply"],
        "poll.retrieve": s["poll_files"] - s["ingest.download"] - s["ingest.apply"],
        "prepare.load_dataset": s["prepare.load_dataset"],
        "prepare.register_run": s["prepare.register_run"],
        "prepare.add_threads": s["prepare.add_threads"],
        "compact": s["compact"],
        "provider.create": s["provider.create"],
        "provider.sync": s["provider.sync"],
        "other": seconds["total"]
        - sum(v for k, v in seconds.items() if k != "total")
        - (s["poll_files"] - s["ingest.download"] - s["ingest.apply"])
        - s["prepare.load_dataset"]
        - s["prepare.register_run"]
        - s["prepare.add_threads"],
    }
    if args.simulator == "process":
        ws_bytes = tree_size(ws_root)
    else:
        ws_bytes = tree_size(ws_root, exclude=ws_root / "state" / "simulated")
    ws_parts = {
        part: round(tree_size(ws_root / part, exclude=ws_root / "state" / "simulated") / MB, 1)
        for part in ("requests", "responses", "state", "runs")
    }
    timing = None
    provider_work = s["provider.create"] + s["provider.retrieve"] + s["provider.sync"]
    if args.batch_latency is not None:
        timing = time_to_result(ws_root, options, args, engine_seconds - provider_work)
        if args.real_time:
            # Here the engine's time includes the latencies slept: compare it with the model's
            # provider seconds plus the local seconds of a run at zero latency.
            timing["measured_seconds"] = round(engine_seconds, 1)
        log(
            f"time to result (latency model: batch {args.batch_latency} s, chat completion {args.sync_latency} s, "
            f"--concurrency {args.concurrency}): {timing['simulated_seconds']} s, {timing['batch_round_trips']} "
            f"batch round trips, cost {timing['cost_usd']} USD (premium {timing['premium_pct']}%)"
        )
    checked_export = check_export(ws_root, root / f"{ws_root.name}-check") if args.check_export else None
    peaks = [p for p in (engine_peak, reported["peak_rss_mb"]) if p is not None]
    return {
        "scale": args.scale,
        "cases": checked["cases"],
        "runs": args.runs,
        "models": args.models,
        "requests": requests,
        "waves": counts["waves"],
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "us_per_request": per,
        "local_us_per_request": round(local / requests * 1e6, 1),
        # The same three parts in this process's CPU time: far less sensitive to other load.
        "local_cpu_us_per_request": round(sum(cpu_seconds.values()) / requests * 1e6, 1),
        "cpu_seconds": {k: round(v, 3) for k, v in cpu_seconds.items()},
        "peak_rss_mb": max(peaks) if peaks else None,
        "workspace_mb": round(ws_bytes / MB, 1),
        "workspace_mb_by": ws_parts,
        "workspace_peak_mb": round(max(meter.workspace_peak, ws_bytes) / MB, 1),
        "speculate": args.speculate,
        "tail_sync": args.tail_sync,
        "compact": not args.no_compact,
        "time_to_result": timing,
        "check_export": checked_export,
        "simulator": args.simulator,
        "peak_rss_mb_by_process": {
            "engine": engine_peak,
            "validate": checked["peak_rss_mb"],
            "report": reported["peak_rss_mb"],
            "simulator": simulator.peak_rss_mb if simulator is not None else None,
        },
        "peak_rss_raised_mb_by": {k: round(v, 1) for k, v in meter.peak_raised_by.items()},
        "breakdown_seconds": {k: round(v, 3) for k, v in breakdown.items()},
        "report_parts": reported["parts"],
        "html": reported.get("html"),
        "report_digest": reported["digest"],
        "metrics_digest": reported["metrics_digest"],
        "request_status": counts["request_status"],
        "thread_status": counts["thread_status"],
        "files": counts["files"],
        "profiled": bool(args.profile),
        "commit": _commit(),
        "package": str(Path(__import__("lexpilot_batch").__file__).resolve().parent),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }


def _commit() -> str | None:
    """The checked-out commit of the package under test (read-only; None outside a git checkout)."""
    import lexpilot_batch

    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(lexpilot_batch.__file__).resolve().parent,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/run_bench.py",
        description="Benchmark the wave engine on a synthetic dataset of N x 432 cases (see bench/README.md).",
        epilog="example: python bench/run_bench.py --scale 1 --runs 5",
    )
    parser.add_argument("--scale", type=int, default=1, help="dataset size in multiples of 432 cases (default 1)")
    parser.add_argument("--speculate", action="store_true", help="prepare the runs with --speculate")
    parser.add_argument("--runs", type=int, default=5, help="run ids to prepare (default 5)")
    parser.add_argument("--models", type=int, default=1, help="evaluated models to prepare (default 1)")
    parser.add_argument(
        "--html", action="store_true", help="also render the HTML report (seconds, size, load time in Chromium)"
    )
    parser.add_argument("--root", help="folder for the dataset, workspace and simulator state (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the generated files instead of deleting them")
    parser.add_argument("--dataset", help="use this dataset file instead of generating one (kept)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic dataset (default 0)")
    parser.add_argument(
        "--simulator",
        choices=("process", "in-process"),
        default="process",
        help="run the simulated provider in its own process (default) or in this one",
    )
    parser.add_argument(
        "--profile",
        help="write a pyinstrument profile (.txt or .html) of the engine phase; "
        "the report's goes beside it (-report suffix). Timings of a profiled run are inflated",
    )
    parser.add_argument(
        "--tail-sync",
        type=int,
        default=0,
        metavar="N",
        help="prepare the runs with --tail-sync N: a wave's groups of at most N requests through chat completions",
    )
    parser.add_argument(
        "--batch-latency",
        type=float,
        metavar="S",
        help="seconds a batch takes in the latency model: adds the time to result, batch round trips and cost",
    )
    parser.add_argument(
        "--sync-latency", type=float, default=1.0, metavar="s", help="seconds a chat completion takes (default 1)"
    )
    parser.add_argument(
        "--latency-spread",
        type=float,
        default=0.0,
        metavar="F",
        help="spread each latency uniformly over [L(1-F), L(1+F)] (default 0)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=8, help="parallel requests of the sync backend (default 8, as the product)"
    )
    parser.add_argument(
        "--prices",
        help="prices file as for `report --prices` (default: every role at 0.15 / 0.60 USD per 1M input / output tokens)",
    )
    parser.add_argument(
        "--real-time",
        action="store_true",
        help="let the simulated provider sleep the latency model, and measure (checks the computed time)",
    )
    parser.add_argument(
        "--poll-interval", type=float, default=0.2, help="seconds between polls with --real-time (default 0.2)"
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="run no speculation, speculation, and speculation with --tail-sync N, each in its own workspace",
    )
    parser.add_argument("--no-compact", action="store_true", help="leave finished waves' files uncompressed")
    parser.add_argument(
        "--check-export",
        action="store_true",
        help="at the end, export the workspace and an uncompressed copy of it and compare them (doctor on both)",
    )
    parser.add_argument("--child-validate", help=argparse.SUPPRESS)
    parser.add_argument("--child-report", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_validate:
        print(json.dumps(child_validate(Path(args.child_validate))))
        return 0
    if args.child_report:
        print(json.dumps(child_report(Path(args.child_report), args.profile, args.html)))
        return 0
    if args.scale < 1 or args.runs < 1 or args.models < 1:
        parser.error("--scale, --runs and --models must be at least 1")
    if (args.compare or args.real_time) and args.batch_latency is None:
        parser.error("--compare and --real-time need --batch-latency S")
    print(json.dumps(run(args), ensure_ascii=False), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
