#!/usr/bin/env python3
"""Checks the YAML files CI cannot run here: they parse, and they say what their readers expect.

- .spi.yml (Swift Package Index): `version: 1`, builder configs whose documentation targets are
  the package's library products, every product documented once.
- .github/workflows/*.yml (GitHub Actions): triggers, and jobs with `runs-on` and steps that each
  `run` a command or `use` an action.

usage: lint-yaml.py
"""
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def library_products():
    manifest = (ROOT / "Package.swift").read_text()
    return set(re.findall(r'\.library\(name: "(\w+)"', manifest))


def check_spi(errors):
    spi = yaml.safe_load((ROOT / ".spi.yml").read_text())
    if not isinstance(spi, dict) or spi.get("version") != 1:
        errors.append(".spi.yml: needs `version: 1`")
        return
    configs = (spi.get("builder") or {}).get("configs")
    if not isinstance(configs, list) or not configs:
        errors.append(".spi.yml: needs builder.configs")
        return
    documented = []
    for config in configs:
        targets = config.get("documentation_targets", [])
        if not isinstance(targets, list):
            errors.append(f".spi.yml: documentation_targets must be a list: {targets!r}")
            continue
        documented += targets
        platform = config.get("platform")
        if platform is not None and platform not in ("ios", "macos-spm", "macos-xcodebuild", "tvos", "watchos",
                                                     "visionos", "linux", "android", "wasm"):
            errors.append(f".spi.yml: unknown platform {platform!r}")
    products = library_products()
    for target in documented:
        if target not in products:
            errors.append(f".spi.yml: {target} is not a library product of Package.swift")
    for product in sorted(products - set(documented)):
        errors.append(f".spi.yml: the product {product} has no documentation target")
    for target in sorted({t for t in documented if documented.count(t) > 1}):
        errors.append(f".spi.yml: {target} is documented twice")


def check_workflow(path, errors):
    name = path.relative_to(ROOT)
    workflow = yaml.safe_load(path.read_text())
    if not isinstance(workflow, dict):
        errors.append(f"{name}: not a mapping")
        return
    # YAML 1.1 reads the key `on` as the boolean true.
    if "on" not in workflow and True not in workflow:
        errors.append(f"{name}: no `on:` triggers")
    jobs = workflow.get("jobs")
    if not isinstance(jobs, dict) or not jobs:
        errors.append(f"{name}: no jobs")
        return
    for job_name, job in jobs.items():
        if "runs-on" not in job:
            errors.append(f"{name}: job {job_name} has no runs-on")
        steps = job.get("steps")
        if not isinstance(steps, list) or not steps:
            errors.append(f"{name}: job {job_name} has no steps")
            continue
        for index, step in enumerate(steps):
            if not isinstance(step, dict) or ("run" in step) == ("uses" in step):
                errors.append(f"{name}: job {job_name}, step {index + 1}: needs exactly one of run and uses")


def main():
    errors = []
    try:
        check_spi(errors)
        workflows = sorted((ROOT / ".github/workflows").glob("*.yml"))
        if not workflows:
            errors.append(".github/workflows: no workflow")
        for path in workflows:
            check_workflow(path, errors)
    except yaml.YAMLError as error:
        errors.append(f"YAML does not parse: {error}")
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    print(f"YAML lint: .spi.yml and {len(list((ROOT / '.github/workflows').glob('*.yml')))} workflow(s), "
          f"{len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
