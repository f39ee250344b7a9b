"""Stage `pretrain_compare`: paired differences curated − filtered_random and curated − random over
seeds (bootstrap CIs, 80%-power detectable difference), from the arms' pretrain metrics."""
from __future__ import annotations

import argparse
import time

from decision_pipeline.common.io import read_json, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.curation.compare import compare_arms


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("arms", nargs="+", help="name=metrics.json for each arm (curated first)")
    ap.add_argument("--metrics", required=True)
    args = ap.parse_args(argv)
    started = time.time()
    arms = {a.split("=", 1)[0]: read_json(a.split("=", 1)[1]) for a in args.arms}
    out = compare_arms(arms)
    write_json(args.metrics, out)
    summary("pretrain_compare", started, **{k: f"{v['ppl']['diff']} {v['ppl']['ci95']}" for k, v in out.items()
                                             if "ppl" in v})


if __name__ == "__main__":
    raise SystemExit(main())
