"""Prompts the drafts are distilled on: made from templates, disjoint from ``data/prompts``.

The target answers each of these greedily; the drafts learn to predict those answers. The
evaluation suite in ``data/prompts/suite.jsonl`` uses other subjects, so the acceptance the
notebooks measure is on held-out prompts.
"""

from __future__ import annotations

import itertools
import random

ENTITIES = {
    "movie": ["title", "director", "year", "rating"],
    "car": ["make", "model", "year", "price"],
    "recipe": ["name", "ingredients", "minutes", "servings"],
    "product": ["sku", "name", "price", "in_stock"],
    "student": ["id", "name", "grade", "courses"],
    "flight": ["number", "origin", "destination", "departure"],
    "song": ["title", "artist", "album", "duration"],
    "hotel": ["name", "city", "stars", "price_per_night"],
    "planet": ["name", "moons", "diameter_km", "has_rings"],
    "employee": ["id", "name", "department", "salary"],
    "restaurant": ["name", "cuisine", "rating", "address"],
    "event": ["name", "date", "location", "attendees"],
}
EXAMPLES = {
    "movie": ["Inception", "Casablanca", "Up"],
    "car": ["a red Toyota Corolla from 2019", "a Ford Mustang"],
    "recipe": ["pancakes", "tomato soup", "fried rice"],
    "product": ["a wireless mouse", "a steel water bottle"],
    "student": ["Maria, grade 10", "Tom, grade 8"],
    "flight": ["LH400 from Frankfurt to New York", "BA117"],
    "song": ["Yesterday by The Beatles", "Clair de Lune"],
    "hotel": ["a small hotel in Lisbon", "a resort in Bali"],
    "planet": ["Saturn", "Mars", "Jupiter"],
    "employee": ["a software engineer named Li", "a nurse named Sam"],
    "restaurant": ["an Italian place in Boston", "a sushi bar"],
    "event": ["a jazz festival", "a science fair"],
}
TABLES = {
    "customers": ["id", "name", "city", "signup_date"],
    "products": ["id", "name", "category", "price"],
    "invoices": ["id", "customer_id", "amount", "paid"],
    "students": ["id", "name", "grade", "school_id"],
    "books": ["id", "title", "author_id", "published_year"],
    "sales": ["id", "region", "amount", "sale_date"],
    "tickets": ["id", "status", "priority", "opened_at"],
    "users": ["id", "username", "email", "last_login"],
}
FUNCTIONS = [
    "reverse_string(s) that returns the string reversed",
    "factorial(n) that returns n factorial",
    "is_palindrome(s) that checks whether a string is a palindrome",
    "count_vowels(s) that counts the vowels in a string",
    "flatten(lst) that flattens a nested list",
    "gcd(a, b) that returns the greatest common divisor",
    "binary_search(arr, x) that returns the index of x in a sorted list or -1",
    "word_count(text) that returns a dict of word frequencies",
    "celsius_to_fahrenheit(c) that converts a temperature",
    "merge_sorted(a, b) that merges two sorted lists",
    "unique(lst) that returns the unique items of a list in order",
    "chunk(lst, n) that splits a list into chunks of size n",
    "max_subarray(nums) that returns the largest sum of a contiguous subarray",
    "read_csv(path) that reads a CSV file into a list of dicts",
]
CLASSES = ["Queue", "BankAccount", "LinkedList", "Counter", "Rectangle", "TodoList", "Timer", "Inventory"]
TOPICS = [
    "the moon", "autumn leaves", "a quiet village", "the first snow", "a city at dawn", "the desert wind",
    "an old bridge", "a lost letter", "the mountains", "a summer storm", "a garden", "the river",
    "friendship", "time", "a cat asleep in the sun", "the sea", "a forest path", "memory",
]
CHARACTERS = [
    "a clockmaker", "a young witch", "a retired astronaut", "a talking fox", "a shy giant",
    "a lighthouse cat", "a time traveller", "a detective who cannot sleep", "a baker on Mars",
]
BRAINSTORMS = [
    "names for a bookshop", "ideas for a rainy weekend", "themes for a school play",
    "gift ideas for a gardener", "names for a pet turtle", "ways to save energy at home",
    "slogans for a bicycle shop", "ideas for a science fair project", "hobbies to try this year",
]


JSON_ASKS = [
    "Return only a JSON object describing a {entity} with the keys {keys}. Use: {example}.",
    "Give me a JSON object for {example} (a {entity}) with the fields {keys}.",
    "Output a single JSON record with the keys {keys} for this {entity}: {example}.",
]


def structured_prompts() -> list[str]:
    prompts = []
    for entity, fields in ENTITIES.items():
        keys = ", ".join(f'"{f}"' for f in fields)
        for example in EXAMPLES[entity]:
            prompts += [ask.format(entity=entity, keys=keys, example=example) for ask in JSON_ASKS]
        prompts.append(f"Return only a JSON array of two {entity} objects, each with the keys {keys}.")
        prompts.append(f"Write a JSON schema for a {entity} with the properties {keys}.")
        prompts.append(f"Extract the fields {keys} into JSON from this text: a {entity} record, {EXAMPLES[entity][0]}.")
    for table, columns in TABLES.items():
        cols = ", ".join(columns)
        prompts += [
            f"Write a SQL statement that creates a table called {table} with the columns {cols}.",
            f"Write a SQL query that selects {columns[1]} and {columns[2]} from {table} ordered by {columns[3]}.",
            f"Write a SQL query that counts the rows in {table} grouped by {columns[2]}.",
            f"Write a SQL query that inserts a row into {table} with the columns {cols}.",
            f"Write a SQL query that finds the five most recent rows of {table} by {columns[3]}.",
            f"Write a SQL query that updates {columns[2]} in {table} for the row with id 3.",
            f"Write a SQL query that joins {table} with another table on {columns[0]} and selects {columns[1]}.",
        ]
    prompts += [f"Write a Python function {spec}." for spec in FUNCTIONS]
    prompts += [f"Write a Python function {spec}, with a docstring and type hints." for spec in FUNCTIONS]
    prompts += [f"Write a JavaScript function {spec}." for spec in FUNCTIONS[:8]]
    prompts += [f"Write a Python class called {name} with a constructor and two useful methods." for name in CLASSES]
    return prompts


def creative_prompts() -> list[str]:
    prompts = [f"Write a short poem about {topic}." for topic in TOPICS]
    prompts += [f"Write the opening paragraph of a story about {who}." for who in CHARACTERS]
    prompts += [f"Brainstorm {what}." for what in BRAINSTORMS]
    prompts += [f"Write a haiku about {topic}." for topic in TOPICS[:12]]
    prompts += [f"Tell a very short story about {who} and {topic}." for who, topic in zip(CHARACTERS, TOPICS)]
    return prompts


def training_prompts(seed: int = 0) -> list[tuple[str, str]]:
    """(category, prompt) pairs, shuffled with ``seed``."""
    pairs = list(itertools.chain(
        (("structured", p) for p in structured_prompts()),
        (("creative", p) for p in creative_prompts()),
    ))
    random.Random(seed).shuffle(pairs)
    return pairs
