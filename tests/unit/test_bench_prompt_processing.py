"""The prompt-processing report's computed figures: the makespan projection and the measured stage span."""

from __future__ import annotations

from adaptstream_bench.prompt_processing import stage_span_ms
from adaptstream_bench.prompt_processing_report import lpt_makespan, projection


def test_lpt_makespan_on_hand_checked_cases():
    # longest first to the least-loaded worker: 5|4, 5|7, 8|7, 8|10 -> 10 (the optimum is 9: 5+4 | 3+3+3)
    assert lpt_makespan([5, 4, 3, 3, 3], 2) == 10
    assert lpt_makespan([3, 3, 2, 2, 2], 2) == 7
    assert lpt_makespan([7, 1, 1, 1], 4) == 7  # one task bounds it, however many workers
    assert lpt_makespan([7, 1, 1, 1], 16) == 7
    assert lpt_makespan([2, 2, 2, 2], 1) == 8
    assert lpt_makespan([], 8) == 0


def test_stage_span_from_task_launch_and_duration():
    tasks = [
        {"launch_ms": 1_000, "duration_ms": 300},
        {"launch_ms": 1_100, "duration_ms": 500},
        {"launch_ms": 1_050, "duration_ms": None},  # no duration recorded: not counted
    ]
    assert stage_span_ms(tasks) == 600.0
    assert stage_span_ms([]) is None


def test_projection_per_configuration_averages_batches():
    batch = {"run_ms": [4.0] * 16, "stage_span_ms": 50.0}  # 16 equal reduce tasks
    r = {
        "results": [
            {"z": 1.0, "input": "time", "allocator": "hash", "batches": [batch, {**batch, "stage_span_ms": 70.0}]}
        ]
    }
    p = projection(r)[(1.0, "time", "hash")]
    assert p["span_ms"] == 60.0
    assert p[8] == 8.0  # two tasks per worker
    assert p[16] == 4.0
