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


SQL_ASKS = [
    "Write a SQL statement that creates a table called {table} with the columns {cols}.",
    "Write a SQL query that selects {c1} and {c2} from {table} ordered by {c3}.",
    "Write a SQL query that counts the rows in {table} grouped by {c2}.",
    "Write a SQL query that inserts a row into {table} with the columns {cols}.",
    "Write a SQL query that finds the five most recent rows of {table} by {c3}.",
    "Write a SQL query that updates {c2} in {table} for the row with id 3.",
    "Write a SQL query that joins {table} with another table on {c0} and selects {c1}.",
]

def sql_prompts(table: str, columns: list[str], asks: list[str]) -> list[str]:
    return [ask.format(table=table, cols=", ".join(columns), c0=columns[0], c1=columns[1], c2=columns[2], c3=columns[3])
            for ask in asks]


def json_prompts(entity: str, fields: list[str], examples: list[str], asks: list[str], whole: bool = True) -> list[str]:
    """Each ask for each example; with ``whole``, then an array, a schema and an extraction of the entity."""
    keys = ", ".join(f'"{f}"' for f in fields)
    prompts = [ask.format(entity=entity, keys=keys, example=example) for example in examples for ask in asks]
    if whole:
        prompts += [f"Return only a JSON array of two {entity} objects, each with the keys {keys}.",
                    f"Write a JSON schema for a {entity} with the properties {keys}.",
                    f"Extract the fields {keys} into JSON from this text: a {entity} record, {examples[0]}."]
    return prompts


def structured_prompts() -> list[str]:
    prompts = []
    for entity, fields in ENTITIES.items():
        prompts += json_prompts(entity, fields, EXAMPLES[entity], JSON_ASKS)
    for table, columns in TABLES.items():
        prompts += sql_prompts(table, columns, SQL_ASKS)
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


def training_prompts(seed: int = 0, prompt_set: str = "base") -> list[tuple[str, str]]:
    """(category, prompt) pairs of one set, shuffled with ``seed``.

    ``base``: the set every draft learns from (drafts/manifest.json). ``extra``: more subjects and phrasings, none
    of them in ``base`` or ``data/prompts``, for the EAGLE-3 head (drafts/eagle3.json says which sets each head saw).
    ``code``: Python, JavaScript and tests only (all structured), new subjects again. ``shapes``: the structured
    shapes the head accepts least on the suite, on subjects of their own (all structured)."""
    structured, creative = {"base": (structured_prompts, creative_prompts),
                            "extra": (extra_structured_prompts, extra_creative_prompts),
                            "code": (code_prompts, list),
                            "shapes": (shapes_prompts, list)}[prompt_set]
    pairs = list(itertools.chain(
        (("structured", p) for p in structured()),
        (("creative", p) for p in creative()),
    ))
    random.Random(seed).shuffle(pairs)
    return pairs


EXTRA_ENTITIES = {
    "laptop": (["brand", "model", "ram_gb", "price"], ["a Lenovo ThinkPad X1", "a 13-inch MacBook Air", "a Dell XPS 15"]),
    "podcast": (["title", "host", "episodes", "language"], ["a weekly history show", "a Spanish cooking podcast", "a tech news daily"]),
    "museum": (["name", "city", "founded", "visitors_per_year"], ["the Louvre", "the Rijksmuseum", "a small railway museum"]),
    "bicycle": (["brand", "type", "gears", "weight_kg"], ["a Trek road bike", "a folding Brompton", "a cargo bike"]),
    "course": (["code", "title", "credits", "teacher"], ["CS101 Introduction to Programming", "a statistics course", "MATH220"]),
    "pet": (["name", "species", "age", "vaccinated"], ["a dog called Rex", "a parrot named Kiwi", "a three-year-old cat"]),
    "video_game": (["title", "platform", "release_year", "genre"], ["Tetris", "The Legend of Zelda", "Minecraft"]),
    "sensor": (["sensor_id", "kind", "unit", "reading"], ["a kitchen thermometer reading 21.5", "a humidity sensor at 40 percent"]),
    "shipment": (["tracking_number", "carrier", "status", "weight_kg"], ["parcel ZX91 sent with DHL", "a 2 kg box in transit"]),
    "appointment": (["patient", "doctor", "date", "time"], ["a dentist visit for Ravi on Monday", "a check-up at 9:30"]),
    "company": (["name", "industry", "founded", "headquarters"], ["a solar panel startup", "Nokia", "a family bakery"]),
    "weather_report": (["location", "temperature_c", "condition", "wind_kph"], ["Oslo on a snowy day", "a sunny afternoon in Rome"]),
}
EXTRA_JSON_ASKS = [
    "Convert this {entity} into JSON with the keys {keys}: {example}.",
    "Respond with JSON only. Describe the {entity} {example} using the keys {keys}.",
    "Return a JSON object with exactly the keys {keys} for {example}.",
]
EXTRA_TABLES = {
    "patients": ["id", "name", "ward", "admitted_at"],
    "flights": ["id", "origin", "destination", "departs_at"],
    "reviews": ["id", "product_id", "stars", "created_at"],
    "payments": ["id", "account_id", "method", "paid_at"],
    "courses": ["id", "title", "credits", "starts_on"],
    "shipments": ["id", "carrier", "status", "shipped_at"],
    "accounts": ["id", "owner", "balance", "opened_on"],
    "events": ["id", "venue", "capacity", "event_date"],
}
EXTRA_SQL_ASKS = [
    "Write a SQL query that deletes the rows of {table} where {c2} is NULL.",
    "Write a SQL query that returns the distinct values of {c2} in {table}.",
    "Write a SQL query that selects every column of {table} where {c3} is in the last 30 days.",
]
EXTRA_FUNCTIONS = [
    "rotate(lst, k) that rotates a list to the right by k places",
    "is_anagram(a, b) that checks whether two strings are anagrams",
    "running_mean(nums) that returns the running average of a list",
    "roman_to_int(s) that converts a Roman numeral to an integer",
    "transpose(matrix) that transposes a list of lists",
    "second_largest(nums) that returns the second largest number",
    "caesar(text, shift) that applies a Caesar cipher",
    "median(nums) that returns the median of a list",
    "slugify(title) that turns a title into a URL slug",
    "dedupe_dicts(rows, key) that removes dicts with a repeated key",
    "parse_date(s) that parses a YYYY-MM-DD string into a date",
    "histogram(values, bins) that counts values per bin",
    "capitalize_words(s) that capitalizes every word of a string",
    "sum_digits(n) that returns the sum of the digits of n",
]
EXTRA_CLASSES = ["Matrix", "ShoppingCart", "Thermostat", "Library", "Playlist", "Stopwatch", "ParkingLot", "Graph"]
EXTRA_TOPICS = [
    "a winter market", "an empty train station", "a paper boat", "the night sky", "a rainy Sunday", "a lemon tree",
    "a broken clock", "the last day of school", "a field of sunflowers", "an island", "fog over the hills", "a violin",
]
EXTRA_CHARACTERS = [
    "a mapmaker", "a robot gardener", "a nervous ghost", "a travelling musician", "a sleepy dragon", "a postwoman",
]
EXTRA_BRAINSTORMS = [
    "names for a bakery", "ideas for a picnic", "names for a board game", "ways to make a small room feel bigger",
    "themes for a photo walk", "ideas for a neighbourhood festival",
]


def extra_structured_prompts() -> list[str]:
    prompts = []
    for entity, (fields, examples) in EXTRA_ENTITIES.items():
        prompts += json_prompts(entity, fields, examples, JSON_ASKS + EXTRA_JSON_ASKS)
    for entity, fields in ENTITIES.items():  # the base subjects, new phrasings
        prompts += json_prompts(entity, fields, EXAMPLES[entity], EXTRA_JSON_ASKS, whole=False)
    for table, columns in EXTRA_TABLES.items():
        prompts += sql_prompts(table, columns, SQL_ASKS + EXTRA_SQL_ASKS)
    for table, columns in TABLES.items():
        prompts += sql_prompts(table, columns, EXTRA_SQL_ASKS)
    prompts += [f"Write a Python function {spec}." for spec in EXTRA_FUNCTIONS]
    prompts += [f"Write a Python function {spec}, with a docstring and type hints." for spec in EXTRA_FUNCTIONS]
    prompts += [f"Write a JavaScript function {spec}." for spec in EXTRA_FUNCTIONS + FUNCTIONS[8:]]
    prompts += [f"Write pytest tests for a Python function {spec}." for spec in FUNCTIONS + EXTRA_FUNCTIONS]
    prompts += [f"Write a Python class called {name} with a constructor and two useful methods." for name in EXTRA_CLASSES]
    return prompts


def extra_creative_prompts() -> list[str]:
    prompts = [f"Write a short poem about {topic}." for topic in EXTRA_TOPICS]
    prompts += [f"Write a haiku about {topic}." for topic in EXTRA_TOPICS]
    prompts += [f"Write a limerick about {topic}." for topic in TOPICS]
    prompts += [f"Write the opening paragraph of a story about {who}." for who in EXTRA_CHARACTERS]
    prompts += [f"Tell a very short story about {who} and {topic}." for who, topic in zip(EXTRA_CHARACTERS, EXTRA_TOPICS)]
    prompts += [f"Brainstorm {what}." for what in EXTRA_BRAINSTORMS]
    return prompts


# The code set: Python first, since the suite's Python prompts are where the EAGLE-3 head accepts least
# (docs/measurements.md, "What more training buys the EAGLE-3 head"). New subjects only: none of the base or
# extra functions, and nothing about primes, Fibonacci numbers or stacks (the suite's code prompts).
CODE_FUNCTIONS = [
    "squares(n) that returns a list of the first n square numbers",
    "evens(n) that returns a list of the first n even numbers",
    "triangular(n) that returns a list of the first n triangular numbers",
    "powers_of_two(n) that returns a list of the first n powers of two",
    "collatz(n) that returns the Collatz sequence starting at n as a list",
    "digits(n) that returns the digits of a non-negative integer as a list",
    "is_leap_year(year) that returns True if the year is a leap year and False otherwise",
    "is_perfect_square(n) that returns True if n is a perfect square and False otherwise",
    "is_sorted(lst) that returns True if a list is sorted in ascending order and False otherwise",
    "is_power_of_two(n) that returns True if n is a power of two and False otherwise",
    "is_valid_email(s) that returns True if a string looks like an email address and False otherwise",
    "is_pangram(s) that returns True if a sentence uses every letter of the alphabet and False otherwise",
    "lcm(a, b) that returns the least common multiple of two integers",
    "power(base, exp) that computes base to the power exp without using **",
    "mean(nums) that returns the arithmetic mean of a list of numbers",
    "variance(nums) that returns the variance of a list of numbers",
    "clamp(x, low, high) that limits a number to a range",
    "dot(a, b) that returns the dot product of two lists of numbers",
    "matrix_multiply(a, b) that multiplies two matrices given as lists of lists",
    "bubble_sort(lst) that sorts a list with bubble sort",
    "insertion_sort(lst) that sorts a list with insertion sort",
    "quick_sort(lst) that sorts a list with quicksort",
    "merge_sort(lst) that sorts a list with merge sort",
    "linear_search(lst, x) that returns the index of x in a list or -1",
    "find_max(lst) that returns the largest item of a list without using max",
    "count_words(s) that counts the words in a string",
    "remove_duplicates(s) that removes repeated characters from a string, keeping the first of each",
    "title_case(s) that capitalizes the first letter of every word",
    "reverse_words(s) that reverses the order of the words in a sentence",
    "longest_word(s) that returns the longest word in a sentence",
    "char_frequency(s) that returns a dict of character counts",
    "compress(s) that run-length encodes a string such as aaabb to a3b2",
    "to_binary(n) that converts a non-negative integer to a binary string",
    "from_binary(s) that converts a binary string to an integer",
    "int_to_roman(n) that converts an integer to a Roman numeral",
    "zip_lists(a, b) that pairs up the items of two lists into a list of tuples",
    "group_by_length(words) that groups words into a dict keyed by their length",
    "invert_dict(d) that swaps the keys and values of a dict",
    "merge_dicts(a, b) that merges two dicts, the second winning on repeated keys",
    "filter_even(nums) that returns only the even numbers of a list",
    "sum_of_squares(nums) that returns the sum of the squares of a list",
    "pairwise_sums(nums, target) that returns every pair of numbers that adds up to target",
    "moving_average(nums, window) that returns the moving averages of a list",
    "cumulative_sum(nums) that returns the running totals of a list",
    "top_k(nums, k) that returns the k largest numbers of a list in descending order",
    "count_lines(path) that counts the lines of a text file",
    "write_json(path, data) that writes a dict to a JSON file",
    "read_json(path) that reads a JSON file and returns its content",
    "days_between(a, b) that returns the number of days between two dates",
    "seconds_to_hms(seconds) that formats a number of seconds as HH:MM:SS",
    "validate_password(p) that checks that a password has at least 8 characters, a digit and a capital letter",
    "parse_query_string(qs) that parses a URL query string into a dict",
    "hamming_distance(a, b) that counts the positions where two strings differ",
    "levenshtein(a, b) that returns the edit distance between two strings",
]
CODE_PYTHON_ASKS = [
    "Write a Python function {spec}.",
    "Write a Python function called {spec}.",
    "Write a Python function {spec}, with a docstring and type hints.",
    "Write a Python function {spec}, and show an example call.",
    "Implement {spec} in Python.",
    "Write a short Python function {spec}. Return only the code.",
]
CODE_CLASSES = {
    "Deque": "append_left, append_right, pop_left and pop_right",
    "Account": "deposit, withdraw and get_balance",
    "Vector2D": "add, subtract, scale and length",
    "Circle": "area, perimeter and contains_point",
    "PriorityQueue": "push, pop, peek and is_empty",
    "LRUCache": "get and put",
    "Book": "checkout, return_book and is_available",
    "Temperature": "to_celsius, to_fahrenheit and to_kelvin",
    "Student": "add_grade, average and best_grade",
    "Tree": "insert, contains and in_order",
    "Set": "add, remove, contains and size",
    "Calendar": "add_event, remove_event and events_on",
}
CODE_CLASS_ASKS = [
    "Write a Python class called {name} with methods {methods}.",
    "Write a Python class {name} that has the methods {methods}, with docstrings.",
    "Write a Python dataclass called {name} and add the methods {methods}.",
]


def code_prompts() -> list[str]:
    prompts = [ask.format(spec=spec) for spec in CODE_FUNCTIONS for ask in CODE_PYTHON_ASKS]
    prompts += [f"Write a JavaScript function {spec}." for spec in CODE_FUNCTIONS]
    prompts += [f"Write pytest tests for a Python function {spec}." for spec in CODE_FUNCTIONS]
    prompts += [ask.format(name=name, methods=methods) for name, methods in CODE_CLASSES.items() for ask in CODE_CLASS_ASKS]
    return prompts


# The shapes set: the structured shapes the EAGLE-3 head still accepts least on 04's prompts (a Python function
# returning "a list of the first n ..." numbers, a JSON record with typed keys, a SELECT with WHERE and ORDER BY, an
# extraction into JSON), on subjects none of the other sets or the suite use: no Fibonacci-like sequence (Lucas,
# Pell, tribonacci), no primes, books, cities, user profiles, employees, orders, invoices or stacks. Aimed at the
# suite's weak prompts by shape, so read its gain there with that in mind (docs/measurements.md says which checks
# were not aimed at).
SHAPES_SEQUENCES = [
    "cubes(n) that returns a list of the first n cube numbers",
    "odds(n) that returns a list of the first n odd numbers",
    "factorials(n) that returns a list of the first n factorials",
    "multiples(k, n) that returns a list of the first n multiples of k",
    "pentagonal(n) that returns a list of the first n pentagonal numbers",
    "catalan(n) that returns a list of the first n Catalan numbers",
    "powers_of_three(n) that returns a list of the first n powers of three",
    "hexagonal(n) that returns a list of the first n hexagonal numbers",
    "harmonic(n) that returns a list of the first n harmonic numbers",
    "countdown(n) that returns a list of the numbers from n down to 1",
    "alternating(n) that returns a list of n numbers alternating between 1 and -1",
    "arithmetic(a, d, n) that returns a list of the first n terms of an arithmetic sequence",
    "geometric(a, r, n) that returns a list of the first n terms of a geometric sequence",
    "letters(n) that returns a list of the first n letters of the alphabet",
    "squares_of_odds(n) that returns a list of the squares of the first n odd numbers",
    "doubling(start, n) that returns a list of the first n values of start doubled again and again",
    "running_totals(n) that returns a list of the sums 1, 1 + 2, 1 + 2 + 3, ... up to n terms",
    "leap_years(start, n) that returns a list of the first n leap years from a start year",
]
SHAPES_PREDICATES = [
    "is_even(n) that returns True if n is an even number and False otherwise",
    "is_vowel(c) that returns True if a character is a vowel and False otherwise",
    "is_armstrong(n) that returns True if n is an Armstrong number and False otherwise",
    "is_perfect(n) that returns True if n is a perfect number and False otherwise",
    "is_uppercase(s) that returns True if every letter of a string is uppercase and False otherwise",
    "is_triangle(a, b, c) that returns True if three lengths can form a triangle and False otherwise",
    "is_isogram(s) that returns True if no letter repeats in a word and False otherwise",
    "is_digit_string(s) that returns True if a string contains only digits and False otherwise",
    "is_weekend(day) that returns True if a day name is Saturday or Sunday and False otherwise",
    "is_harshad(n) that returns True if n is divisible by the sum of its digits and False otherwise",
    "is_balanced(s) that returns True if the brackets of a string are balanced and False otherwise",
    "is_monotonic(lst) that returns True if a list never increases or never decreases and False otherwise",
]
SHAPES_CLASSES = {
    "CircularQueue": "enqueue, dequeue, front and is_empty",
    "MinHeap": "push, pop, peek and size",
    "BoundedBuffer": "put, get, is_full and is_empty",
    "History": "visit, back, forward and current",
    "Wallet": "add_money, spend, balance and is_empty",
    "Scoreboard": "add_points, leader, reset and scores",
}
SHAPES_CLASS_ASKS = [
    "Write a Python class called {name} with methods {methods}.",
    "Write a Python class {name} with the methods {methods}.",
]
SHAPES_RECORDS = {  # entity: (typed keys, the example)
    "customer account": ('"id" (integer), "name", "email", "is_verified" (boolean) and "tags" (list)',
                         "Omar Haddad, id 7, tagged vip and newsletter"),
    "team member": ('"id" (integer), "name", "team", "is_remote" (boolean) and "skills" (list)',
                    "Kenji Mori, id 15, in the data team, remote, knows Python and SQL"),
    "library member": ('"member_id" (integer), "name", "email", "has_overdue" (boolean) and "loans" (list)',
                       "Grace Obi, member 301, with two loans"),
    "device": ('"id" (integer), "hostname", "ip", "is_online" (boolean) and "services" (list)',
               "the server web-01 at 10.0.0.5 running nginx and ssh"),
    "gym member": ('"id" (integer), "name", "plan", "is_active" (boolean) and "classes" (list)',
                   "Lucia Romero, id 88, on the monthly plan, taking yoga and spinning"),
    "course enrolment": ('"student_id" (integer), "course", "term", "is_passed" (boolean) and "grades" (list)',
                         "student 5120 in Physics 1, spring term, grades 14, 16 and 12"),
    "job posting": ('"id" (integer), "title", "company", "is_open" (boolean) and "requirements" (list)',
                    "a backend developer job at Nordlys, id 3"),
    "recipe card": ('"id" (integer), "name", "cuisine", "is_vegetarian" (boolean) and "ingredients" (list)',
                    "a mushroom risotto, id 12"),
    "support agent": ('"agent_id" (integer), "name", "email", "is_on_call" (boolean) and "languages" (list)',
                      "Priya Nair, agent 9, who speaks English and Hindi"),
    "vehicle": ('"id" (integer), "plate", "make", "is_electric" (boolean) and "drivers" (list)',
                "a Renault Zoe with plate AB-123-CD, id 4"),
    "newsletter subscriber": ('"id" (integer), "email", "country", "is_confirmed" (boolean) and "topics" (list)',
                              "subscriber 2045 from Chile, interested in science and travel"),
    "patient": ('"id" (integer), "name", "blood_type", "is_insured" (boolean) and "allergies" (list)',
                "Tomasz Nowak, id 61, blood type A+, allergic to penicillin"),
}
SHAPES_RECORD_ASKS = [
    "Write a JSON object for a {entity} with the keys {keys}. The {entity} is {example}.",
    "Return only a JSON object for a {entity} with the keys {keys}, for {example}.",
    "Create a JSON object describing a {entity} with the keys {keys}: {example}.",
    "Output only JSON: a {entity} object with the keys {keys}. Use {example}.",
]
SHAPES_ARRAYS = [
    ('"river", "continent" and "length_km"', "the Nile, the Amazon and the Danube"),
    ('"mountain", "country" and "height_m"', "Everest, Kilimanjaro and Mont Blanc"),
    ('"language", "creator" and "year"', "Python, Java and Rust"),
    ('"planet", "moons" and "has_rings"', "Mercury, Venus and Neptune"),
    ('"painter", "nationality" and "famous_work"', "Frida Kahlo, Claude Monet and Rembrandt"),
    ('"instrument", "family" and "strings"', "a violin, a harp and a guitar"),
    ('"team", "sport" and "founded"', "Ajax, the Chicago Bulls and the New York Yankees"),
    ('"element", "symbol" and "atomic_number"', "hydrogen, iron and gold"),
]
SHAPES_EXTRACTIONS = [
    ('"name", "date" and "total"', "Receipt from Ella Brown dated 2023-11-02 for a total of 84 euros."),
    ('"sender", "date" and "subject"', "Email from Raj Patel sent on 2024-01-19 about the quarterly budget."),
    ('"patient", "date" and "doctor"', "Appointment for Mia Chen on 2024-05-08 with Dr. Alvarez."),
    ('"company", "date" and "amount"', "Payment to Acme Tools on 2023-09-30 of 1200 dollars."),
    ('"product", "quantity" and "price"', "Purchase of 3 notebooks at 4.50 each."),
    ('"flight", "date" and "seat"', "Boarding pass for flight KL1234 on 2024-07-14, seat 21C."),
    ('"tenant", "start_date" and "rent"', "Lease signed by Sofia Rossi starting 2024-02-01 at 950 euros per month."),
    ('"runner", "time" and "position"', "Race result: Amara Eze finished in 2:41:10, third place."),    ('"guest", "check_in" and "nights"', "Booking for Lars Berg, checking in on 2024-08-03 for 4 nights."),
    ('"item", "date" and "cost"', "Repair of a washing machine on 2023-12-12 that cost 180 euros."),
    ('"course", "date" and "score"', "Exam in Organic Chemistry taken on 2024-06-20 with a score of 17."),
    ('"customer", "date" and "balance"', "Statement for Noor Aziz on 2024-03-31 showing a balance of 2,310 dollars."),
]
SHAPES_EXTRACTION_ASKS = [
    "Extract the fields into JSON with the keys {keys}: {text}",
    "Extract {keys} from this text and return JSON: {text}",
]
SHAPES_TABLES = {  # table: (columns to select, the filter column and value, the order column)
    "teachers": ("name and subject", "years_experience is greater than 10", "years_experience"),
    "apartments": ("address and rent", "rent is less than 1500", "rent"),
    "athletes": ("name and country", "medals is greater than 2", "medals"),
    "vehicles": ("plate and mileage", "mileage is greater than 100000", "mileage"),
    "recipes": ("title and cook_minutes", "cook_minutes is less than 30", "cook_minutes"),
    "servers": ("hostname and cpu_load", "cpu_load is greater than 0.8", "cpu_load"),
    "donations": ("donor and amount", "amount is at least 100", "amount"),
    "parcels": ("tracking_code and weight", "weight is greater than 20", "weight"),    "hotels": ("name and stars", "stars is at least 4", "stars"),
    "loans": ("borrower and principal", "principal is greater than 25000", "principal"),
    "flights_log": ("pilot and hours", "hours is greater than 500", "hours"),
    "plants": ("species and height_cm", "height_cm is less than 50", "height_cm"),
}
SHAPES_SELECT_ASKS = [
    "Write a SQL query that selects the {cols} of all rows in the table {table} whose {where}, ordered by {order} "
    "descending.",
    "Write a SQL query that returns the {cols} from {table} where {where}, sorted by {order} in ascending order.",
    "Write a SQL query that lists the {cols} of the {table} whose {where}.",
]
SHAPES_GROUP_ASKS = [  # table: (the grouping column, the counted things)
    ("enrollments", "course_id", "students"), ("rentals", "car_id", "rentals"), ("visits", "patient_id", "visits"),
    ("bookings", "guest_id", "bookings"), ("tickets", "agent_id", "tickets"), ("reviews", "product_id", "reviews"),
]
SHAPES_CREATE = {
    "rentals": "id (integer primary key), car_id (integer), daily_rate (decimal) and started_at (timestamp)",
    "bookings": "id (integer primary key), guest_id (integer), nights (integer) and checked_in (boolean)",
    "visits": "id (integer primary key), patient_id (integer), cost (decimal) and visited_on (date)",
    "donations": "id (integer primary key), donor (text), amount (decimal) and given_at (timestamp)",
    "parcels": "id (integer primary key), tracking_code (varchar(20)), weight (decimal) and sent_at (timestamp)",
    "teachers": "id (integer primary key), name (text), subject (text) and hired_on (date)",
}


def shapes_prompts() -> list[str]:
    prompts = [ask.format(spec=spec) for spec in SHAPES_SEQUENCES + SHAPES_PREDICATES for ask in CODE_PYTHON_ASKS]
    prompts += [f"Write a JavaScript function {spec}." for spec in SHAPES_SEQUENCES]
    prompts += [ask.format(name=name, methods=methods) for name, methods in SHAPES_CLASSES.items()
                for ask in SHAPES_CLASS_ASKS]
    prompts += [ask.format(entity=entity, keys=keys, example=example)
                for entity, (keys, example) in SHAPES_RECORDS.items() for ask in SHAPES_RECORD_ASKS]
    prompts += [f"Return only a JSON array of three objects, each with the keys {keys}, for {items}."
                for keys, items in SHAPES_ARRAYS]
    prompts += [ask.format(keys=keys, text=text) for keys, text in SHAPES_EXTRACTIONS for ask in SHAPES_EXTRACTION_ASKS]
    prompts += [ask.format(cols=cols, table=table, where=where, order=order)
                for table, (cols, where, order) in SHAPES_TABLES.items() for ask in SHAPES_SELECT_ASKS]
    prompts += [f"Write a SQL query that counts the number of {things} per {column.removesuffix('_id')} in the table "
                f"{table} and returns {column} and the count, for those with more than {n} {things}."
                for (table, column, things), n in zip(SHAPES_GROUP_ASKS, (3, 5, 2, 4, 10, 8))]
    prompts += [f"Write a SQL statement that creates a table called {table} with columns {cols}."
                for table, cols in SHAPES_CREATE.items()]
    return prompts
