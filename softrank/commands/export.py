"""``softrank-certify export STORE --out BUNDLE``: a replay bundle of a store's brackets."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from softrank.certify.numerics import workbound
from softrank.witnesses import open_store

from ..export import check_bundle_target, write_bundle
from ..runner import iter_checks
from ..terminal import shown
from ..words import all_proved
from ..workers import jobs_count
from ._intrinsic_check import refuse_intrinsic_errors

NAME = "export"
HELP = ("check a store and write a replay bundle (exact rationals, raw arrays, sha256 per "
        "file) that replay/replay.py rechecks with the standard library alone")

EXAMPLES = (  # shown under --help
    'softrank-certify export examples/minilm --out bundle.zip',
    'python replay/replay.py bundle.zip              # independent exact replay',
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", help="store directory (format softrank-brackets v1)")
    p.add_argument("--out", required=True, metavar="BUNDLE",
                   help="bundle file to write (.zip; refused if it exists, unless --force)")
    p.add_argument("--force", action="store_true",
                   help="replace BUNDLE if it is an existing regular file")
    p.add_argument("--jobs", type=jobs_count, default=1, metavar="N", help="worker processes")
    p.add_argument("--no-kyfan", action="store_true",
                   help="skip the Ky Fan certificate search for frobenius_tail ends")
    p.add_argument("--max-work", default=None, metavar="UNITS",
                   help="work limit per record's checks and per Ky Fan search (default: the "
                        "kernel's, as for check)")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")


def export_records(store: str, records: list[dict[str, Any]], out: str, *,
                   kyfan: bool = True, as_json: bool = False, digest: str | None = None,
                   max_work: int | None = None, force: bool = False,
                   field: str = "--out") -> dict[str, Any] | None:
    """Writes the bundle and prints its counts (shared with ``check --export``), or writes
    nothing and returns None when there are no records (a bundle of no ends replays as
    exit 1).  ``digest`` is the records digest of the store the checks read (the bundle's
    must be the same); ``force`` lets it replace an existing regular file."""
    if not records:
        print("softrank-certify: the store holds no brackets: nothing to export, no bundle "
              "written", file=sys.stderr)
        return None
    counts = write_bundle(store, records, out, frobenius=kyfan, digest=digest,
                          max_work=max_work, force=force, field=field)
    if as_json:
        print(json.dumps({"bundle": out, **counts}))
    else:
        print(f"bundle {shown(out)}: {counts['ends']} ends, {counts['kernel_proved']} proved "
              f"by the kernel, {counts['kyfan_missing']} frobenius ends without a Ky Fan "
              f"certificate (the replayer leaves those undecided); {counts['bytes']} bytes, "
              f"manifest sha256 {counts['manifest_sha256']}", file=sys.stderr)
    return counts


def run(args: argparse.Namespace) -> int:
    check_bundle_target(args.out, "--out", args.force)
    max_work = None if args.max_work is None else workbound.parse_max_work(args.max_work)
    reader = open_store(args.store)  # validates the records before any work
    digest = reader.digest
    refuse_intrinsic_errors(reader, max_work)  # not exported, but what check refuses is refused
    records = list(iter_checks(args.store, jobs=args.jobs, max_work=max_work, digest=digest))
    if export_records(args.store, records, args.out, kyfan=not args.no_kyfan,
                      as_json=args.json, digest=digest, max_work=max_work,
                      force=args.force) is None:
        return 1  # no records: no bundle, and 0 ("every claim proved") is not due
    # the bundle holds every end, proved or not: the exit code is check's
    return 0 if all_proved(records) else 1
