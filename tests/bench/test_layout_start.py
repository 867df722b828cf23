"""``bench/run.py layout-start`` at its smoke size: the agent's start to
READY on rebooted host 2 (8 GPUs) with and without the declared layout
to restore.  Its Placement calls are exact: the layout adds none."""

from tests.fixtures.bench_smoke import bench


def test_layout_start(tmp_path):
    rows, _ = bench('layout-start', tmp_path)
    figures = {r['case']: (r['runs'], r['placement_calls'],
                           r['placement_writes'], r['steps_taken'],
                           r['layout_holds']) for r in rows}
    assert figures == {
        # A restart reads its tree back (one GET): no write.
        'not rebooted, no layout': (1, 1, 0, 0, None),
        'not rebooted, layout holds': (1, 1, 0, 0, True),
        # The 20 MIG steps (mig_mode, 7 + 2 GPU and as many compute
        # instances) restore the tree: the calls of a plain restart.
        'rebooted, layout restored': (1, 1, 0, 20, True),
        # Without the layout the reboot shows in Placement: the two MIG
        # GPUs' usages read, their inventories rewritten.
        'rebooted, no layout': (1, 7, 4, 0, None)}
    assert all(0 < r['min_s'] <= r['median_s'] <= r['max_s'] for r in rows)
