"""Write the long-context entries of data/prompts/suite.jsonl: a long document and a short question.

Four kinds of document (maintenance log, order list, server log, meeting minutes), two seeds each: eight
entries. Each document has 120 lines (about 2,000-3,000 SmolLM2 tokens); the question asks for a JSON record
of one of its first two lines, so a document cut to any length of at least two lines still answers it.
Run once; the output is committed (re-running with the same seeds writes the same file).

    python scripts/make_long_context.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SUITE = Path(__file__).resolve().parent.parent / "data" / "prompts" / "suite.jsonl"
LINES = 120
NAMES = ["Ana Lopez", "Bo Chen", "Carla Diaz", "Dev Patel", "Eli Novak", "Fatima Khan", "Gus Olsen", "Hana Sato"]
SITES = ["north depot", "river plant", "east yard", "harbour office", "hill station", "west mill"]
STATES = ["running normally", "stopped for repairs", "running at half speed", "waiting for parts", "idle"]
ITEMS = ["desk lamp", "office chair", "monitor arm", "keyboard", "notebook", "standing desk", "headset"]
ORDER_STATES = ["shipped", "delivered", "cancelled", "waiting for payment", "returned"]
SERVICES = ["api", "auth", "billing", "search", "worker"]
PATHS = ["/orders", "/login", "/invoices", "/search", "/users", "/reports"]
TOPICS = ["the budget", "the hiring plan", "the office move", "the release date", "the vendor contract"]
DECISIONS = ["approved", "postponed", "rejected", "sent back for changes"]


def maintenance(rng: random.Random, i: int) -> tuple[str, dict]:
    site, state, temp = rng.choice(SITES), rng.choice(STATES), rng.randint(12, 38)
    return (f"Day {i}: the pump at the {site} was {state}; the temperature was {temp} degrees.",
            {"day": i, "site": site, "state": state, "temperature": temp})


def orders(rng: random.Random, i: int) -> tuple[str, dict]:
    number, name, item = 1000 + i, rng.choice(NAMES), rng.choice(ITEMS)
    qty, price, state = rng.randint(1, 9), round(rng.uniform(5, 400), 2), rng.choice(ORDER_STATES)
    return (f"Order {number}: {name} bought {qty} x {item} at {price:.2f} EUR each; status {state}.",
            {"order": number, "customer": name, "item": item, "quantity": qty, "status": state})


def server_log(rng: random.Random, i: int) -> tuple[str, dict]:
    minute, second = divmod(i * 7, 60)
    service, path = f"{rng.choice(SERVICES)}-{rng.randint(1, 9)}", rng.choice(PATHS)
    ms, status = rng.randint(3, 2500), rng.choice([200, 200, 200, 201, 404, 500, 503])
    return (f"10:{minute:02d}:{second:02d} {service} handled {path} in {ms} ms with status {status}",
            {"time": f"10:{minute:02d}:{second:02d}", "service": service, "path": path, "ms": ms, "status": status})


def minutes(rng: random.Random, i: int) -> tuple[str, dict]:
    owner, other, topic, decision = *rng.sample(NAMES, 2), rng.choice(TOPICS), rng.choice(DECISIONS)
    return (f"Item {i}: {owner} presented {topic} to {other}; decision: {decision}.",
            {"item": i, "owner": owner, "topic": topic, "decision": decision})


KINDS = {
    "maintenance_log": (maintenance, "Here is a maintenance log.", "line {i} (Day {i})",
                        "day, site, state and temperature"),
    "orders": (orders, "Here is a list of orders.", "order {n}", "order, customer, item, quantity and status"),
    "server_log": (server_log, "Here is a server log.", "the entry at {time}", "time, service, path, ms and status"),
    "meeting_minutes": (minutes, "Here are the minutes of a meeting.", "item {i}", "item, owner, topic and decision"),
}


def entry(kind: str, seed: int, index: int) -> dict:
    make, intro, which, keys = KINDS[kind]
    rng = random.Random(f"{kind}-{seed}")
    lines, records = zip(*(make(rng, i) for i in range(1, LINES + 1)))
    pick = rng.randrange(2)
    record = records[pick]
    target = which.format(i=pick + 1, n=record.get("order", ""), time=record.get("time", ""))
    question = f"Return only a JSON object with the keys {keys} for {target}."
    return {
        "id": f"long-{kind.replace('_', '-')}-{index:02d}", "category": "long_context", "subcategory": kind,
        "intro": intro, "document": "\n".join(lines), "question": question, "answer": json.dumps(record),
        "prompt": f"{intro}\n\n" + "\n".join(lines) + f"\n\n{question}",
    }


def main() -> None:
    kept = [line for line in SUITE.read_text().splitlines()
            if line.strip() and json.loads(line)["category"] != "long_context"]
    entries = [entry(kind, seed, 20 + 2 * n + seed) for n, kind in enumerate(KINDS) for seed in (0, 1)]
    SUITE.write_text("\n".join(kept + [json.dumps(e) for e in entries]) + "\n")
    print(f"{SUITE}: {len(kept)} short prompts kept, {len(entries)} long-context entries written")


if __name__ == "__main__":
    main()
