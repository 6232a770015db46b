"""``softrank-certify export STORE --out BUNDLE``: a replay bundle of a store's brackets."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..export import check_bundle_target, write_bundle
from ..runner import iter_checks
from ..words import all_proved

NAME = "export"
HELP = ("check a store and write a replay bundle (exact rationals, raw arrays, sha256 per "
        "file) that replay/replay.py rechecks with the standard library alone")

EXAMPLES = (  # shown under --help
    'softrank-certify export examples/minilm --out bundle.zip',
    'python replay/replay.py bundle.zip              # independent exact replay',
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", help="store directory (format softrank-brackets v1)")
    p.add_argument("--out", required=True, metavar="BUNDLE", help="bundle file to write (.zip)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="worker processes")
    p.add_argument("--no-kyfan", action="store_true",
                   help="skip the Ky Fan certificate search for frobenius_tail ends")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")


def export_records(store: str, records: list[dict[str, Any]], out: str, *,
                   kyfan: bool = True, as_json: bool = False) -> dict[str, Any]:
    """Writes the bundle and prints its counts (shared with ``check --export``)."""
    counts = write_bundle(store, records, out, frobenius=kyfan)
    if as_json:
        print(json.dumps({"bundle": out, **counts}))
    else:
        print(f"bundle {out}: {counts['ends']} ends, {counts['kernel_proved']} proved by the "
              f"kernel, {counts['kyfan_missing']} frobenius ends without a Ky Fan "
              f"certificate, {counts['skipped_errors']} brackets skipped for input errors; "
              f"{counts['bytes']} bytes, manifest sha256 {counts['manifest_sha256']}",
              file=sys.stderr if not as_json else sys.stdout)
    return counts


def run(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        print("softrank-certify export: error: --jobs must be >= 1", file=sys.stderr)
        return 2
    check_bundle_target(args.out, "--out")
    records = list(iter_checks(args.store, jobs=args.jobs))
    counts = export_records(args.store, records, args.out, kyfan=not args.no_kyfan,
                            as_json=args.json)
    if counts["skipped_errors"]:
        return 2
    # the bundle holds every end, proved or not: the exit code is check's
    return 0 if all_proved(records) else 1
