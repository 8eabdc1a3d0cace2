"""A labelled near-duplicate evaluation set built from real English text available offline.

The text comes from the Python language reference that ships with CPython
(``pydoc_data.topics``), from the docstrings of a fixed list of standard-library modules
(paragraphs that are mostly code or tables are left out), and from a few press releases and
product pages written for this set, so that "the same press release about another city" and
"the same product page with another SKU" look like what a spider really fetches.

Everything is deterministic for a given seed and interpreter: the docstrings are those of the
running Python, so another Python version gives a slightly different (equally valid) set.
Pure Python and stdlib only; no network.

>>> pairs = labelled_pairs(per_kind=2)
>>> sorted({p.kind for p in pairs}) == sorted(KINDS_POSITIVE + KINDS_NEGATIVE)
True
>>> shingle_jaccard("a b c d", "a b c e")
0.3333333333333333
"""

from __future__ import annotations

import importlib
import inspect
import platform
import random
import re
import statistics
import types
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "KINDS_NEGATIVE",
    "KINDS_POSITIVE",
    "Pair",
    "documents",
    "labelled_pairs",
    "n_edits",
    "pairs_at_similarity",
    "shingle_jaccard",
    "summary",
    "vocabulary",
]

KINDS_POSITIVE: tuple[str, ...] = (
    "exact",
    "case_whitespace",
    "word_swap_0.5pct",
    "word_swap_1pct",
    "word_swap_2pct",
    "insert_delete_2pct",
    "moved_sentence",
    "city_swap",
    "sku_change",
)
KINDS_NEGATIVE: tuple[str, ...] = (
    "heavy_edit_25pct",
    "unrelated",
    "same_source",
    "shared_template",
)

#: Fraction of words replaced by each word-swap kind (``heavy_edit_25pct`` is a negative).
SWAP_FRACTIONS: dict[str, float] = {
    "word_swap_0.5pct": 0.005,
    "word_swap_1pct": 0.01,
    "word_swap_2pct": 0.02,
    "heavy_edit_25pct": 0.25,
}
INSERT_DELETE_FRACTION = 0.02


@dataclass(frozen=True)
class Pair:
    """Two documents in crawl order and whether ``b`` should be dropped as a duplicate of ``a``."""

    a: str  # the document kept first
    b: str  # the document arriving later
    duplicate: bool  # True: b is a near (or exact) duplicate of a and should be dropped
    kind: str  # edit kind, one of KINDS_POSITIVE or KINDS_NEGATIVE
    words: int  # number of words in a


# --------------------------------------------------------------------------------------------
# Hand-written documents: press releases (``{city}``, ``{CITY}`` in the dateline) and product
# pages (``{sku}``, ``{price}``).

PRESS_RELEASES: tuple[str, ...] = (
    """{CITY}, March 4 -- Harbourline Logistics today announced the opening of a regional office in
{city}, its fourth in the country and the first designed from the start around its new
route-planning service. The office, located in a converted warehouse close to the central railway
station, will employ forty people by the end of the year, most of them hired locally.

"We have been serving customers in {city} from two hundred miles away for almost a decade," said
Maria Ellison, chief operating officer of Harbourline. "Being here means our dispatchers can visit
a loading dock in the morning and fix a problem before lunch, instead of sending emails back and
forth for a week."

The new team will coordinate freight for more than three hundred retailers and manufacturers in the
region, with a particular focus on small businesses that ship fewer than ten pallets a week.
Harbourline said that smaller shippers have been hit hardest by rising fuel costs, and that pooling
their loads on shared routes can cut delivery prices by as much as a fifth.

The company is also partnering with the local community college to offer a twelve-week course in
warehouse operations and transport planning. Students who complete the course will be guaranteed an
interview for one of the open positions, and the first group is expected to start in September.

An open house for customers, neighbours and job seekers will take place on the last Saturday of the
month, with guided tours of the building every hour and short talks from the operations team.

About Harbourline Logistics: founded in 2009, Harbourline plans and manages road and rail freight
for about two thousand customers. It is privately owned and employs nine hundred people across the
country.""",
    """{CITY}, June 12 -- Tessellate Software has released Fieldday, a scheduling application for
companies that send technicians to customer sites, at a launch event held this morning at its
headquarters in {city}. The application plans each technician's day around travel times, skills and
spare parts, and rearranges the schedule automatically when a job runs late or a customer cancels.

Early customers include a heating and plumbing firm, a company that services lifts in office
buildings, and a regional network of veterinary practices that visit farms. During a six-month
pilot, the plumbing firm reported that its engineers completed one more visit per day on average,
and that the number of missed appointments fell by more than half.

"Most scheduling tools assume that a plan made at eight in the morning will still be right at
noon," said Daniel Okafor, who founded Tessellate in {city} five years ago. "Anyone who has worked
in the field knows it never is. Fieldday treats the plan as something that changes all day long,
and it keeps customers informed when it does."

Technicians use a mobile application that works without a network connection and synchronises when
the signal returns, which was one of the most requested features during the pilot. Office staff see
the whole day on a single map and can move a job by dragging it to another person.

Fieldday is available from today with a thirty-day free trial. Pricing starts at twenty-five
dollars per technician per month, with discounts for charities and for companies with fewer than
five technicians.

Tessellate Software employs sixty people and will add twenty engineering and support roles in
{city} over the next year.""",
    """{CITY}, April 22 -- More than two hundred pupils from eleven schools gathered at Riverside
Academy in {city} on Friday for the region's annual young scientists fair, the largest since the
event began fourteen years ago. Projects ranged from a solar-powered water pump built from bicycle
parts to a six-month study of which birds visit school gardens and at what time of day.

The overall prize was awarded to a team of three thirteen-year-olds who measured air quality
outside their school gates during the morning drop-off. They borrowed sensors from a university
laboratory, recorded readings every minute for eight weeks, and showed that pollution levels fell
sharply on the days when the road was closed to cars. Their findings have already been presented to
the local council, which is considering a permanent closure during school hours.

"What impressed the judges was not only the data but how honestly they described its limits," said
Dr. Helen Marsh, a physicist and one of the volunteer judges. "They told us which days the sensors
failed and why they left those days out. That is exactly what good science looks like."

Other prizes went to a project on the strength of paper bridges, a survey of how much food is
thrown away in school canteens, and a simple app that helps younger children learn to read an
analogue clock.

The fair was organised by teachers from Riverside Academy with support from local businesses, which
donated equipment and prizes. Parents and visitors were invited to vote for their favourite stand,
and more than nine hundred votes were cast during the afternoon.

Next year's fair will again be held in {city}, and schools that wish to take part are asked to
register before the end of January.""",
    """{CITY}, September 3 -- The central public library in {city} will reopen to the public on
Monday after an eighteen-month renovation that has doubled the space available for study and added
a children's floor, a recording studio and a workshop with sewing machines and three-dimensional
printers.

The library's main reading room, which dates from 1912, has been restored to its original design.
Workers removed a false ceiling added in the 1970s, revealing a glass roof that now lights the room
during the day. The wooden shelves and reading desks have been repaired rather than replaced, and
every desk now has power sockets and good lighting.

"For many people in {city}, the library is the only warm, quiet place they can go without spending
money," said the head librarian, Thomas Reid. "We wanted to keep everything people loved about the
old building and make it work for how they use it today, which means longer opening hours, more
places to sit, and staff who can help with forms, job applications and computers as well as books."

From next week the library will open seven days a week, from eight in the morning until nine in the
evening on weekdays. Membership remains free for everyone who lives, works or studies in the area,
and new members can register online or at the front desk with a proof of address.

The renovation cost was shared between the city, a national heritage fund and more than two
thousand individual donors, whose names are engraved on a panel in the entrance hall.

An opening weekend of readings, concerts and family activities is planned, and a full programme is
available at the front desk and on the library's website.""",
    """{CITY}, November 17 -- The Northgate community health clinic in {city} will extend its
opening hours into the evenings and on Saturdays from the first of December, following a survey in
which more than half of its patients said they found it difficult to attend appointments during
working hours.

The clinic, which serves about eighteen thousand registered patients, will stay open until eight in
the evening from Monday to Thursday and from nine until one on Saturdays. The extra hours will be
covered by three newly recruited nurses, a pharmacist and a rotating team of doctors, and will
include walk-in sessions for minor injuries and vaccinations.

"We kept hearing the same story from people who work in shops, warehouses and hospitals
themselves," said Dr. Priya Nandakumar, the clinic's senior partner. "They could not get away
during the day, so they waited until a small problem became a big one and ended up in the emergency
department. Evening appointments are a simple way to catch those problems early."

The clinic will also pilot a text message service that reminds patients of their appointments and
allows them to cancel with a single reply, freeing the slot for someone else. During a trial at
another clinic in the region, reminders reduced the number of missed appointments by about a third.

Patients can book evening and weekend appointments by telephone, online, or at the reception desk.
Walk-in sessions do not require a booking, but patients are asked to bring their registration card.

The extension is funded for two years by the regional health authority, which will review waiting
times and patient satisfaction in {city} before deciding whether to offer the same hours at other
clinics.""",
    """{CITY}, July 8 -- The {city} Harvest Festival returns to the riverside park this weekend for
its twentieth year, with more than one hundred and fifty stalls run by farmers, bakers,
cheesemakers and cooks from across the region. Organisers expect around forty thousand visitors
over the two days, a record for the event.

The festival began in 2004 as a handful of tables in a supermarket car park, set up by farmers who
wanted to sell directly to customers. It has since grown into one of the largest food events in the
country, but the organisers say the rule that every stall must make or grow what it sells has never
changed.

"People come for the food, but they come back because they get to talk to the person who made it,"
said festival director Anna Kowalski. "You can ask the baker why her bread takes two days, or ask a
farmer what the summer weather did to his strawberries. You cannot do that in a shop."

This year's programme includes cooking demonstrations by chefs from restaurants in {city}, a
competition for the best home-made jam, workshops on preserving and fermenting vegetables, and a
children's tent where young visitors can plant seeds to take home. Live music will play on two
stages from noon until ten in the evening.

To reduce waste, every stall will serve food on reusable plates, which visitors return to washing
stations for a small deposit. Last year the scheme kept an estimated four tonnes of packaging out
of landfill.

Entry is free. Visitors are encouraged to arrive by bus, bicycle or on foot, as parking near the
park is limited, and extra buses will run from the central station every ten minutes.""",
    """{CITY}, February 27 -- The city council of {city} last night approved a plan to build forty
kilometres of protected cycle lanes over the next four years, linking every district to the city
centre and to the main railway station. The plan passed by twenty-nine votes to fourteen after a
debate that lasted more than five hours.

The new lanes will be separated from traffic by low concrete kerbs and planters, and junctions will
be redesigned so that cyclists have their own signals. About three hundred parking spaces will be
removed along the busiest routes, and the council will build two new covered bicycle parks near the
station with room for a thousand bicycles.

Supporters of the plan pointed to figures showing that cycling in {city} has tripled since a first
protected lane opened on the riverside road three years ago, and that injuries to cyclists on that
road fell sharply in the same period. Several business groups also backed the plan, arguing that
customers who arrive by bicycle visit local shops more often.

Opponents, including some shop owners on the high street, said that losing parking would drive
customers to out-of-town shopping centres, and asked for more consultation before work begins. The
council agreed to hold public meetings in each district before the detailed design of each route is
finalised.

"This is not about forcing anyone out of their car," said councillor James Whitfield, who chairs
the transport committee. "It is about giving people a safe choice. Right now, many parents in
{city} would like their children to cycle to school, but they simply do not think the roads are
safe enough."

Construction of the first two routes is expected to begin in the autumn.""",
    """{CITY}, October 5 -- Greenleaf Energy, a company that recovers lithium, nickel and cobalt
from used batteries, has raised sixty million dollars in new funding to build its first full-scale
recycling plant on the outskirts of {city}. The plant is expected to process twenty thousand tonnes
of batteries a year when it opens in 2026 and to create about two hundred and fifty permanent jobs.

The funding round was led by a group of infrastructure investors and includes a loan from a
national green investment bank. Greenleaf has so far operated a pilot plant that handles a few
hundred tonnes a year, mostly from electric scooters and power tools.

"Every electric car on the road today will need a new battery or a recycler one day," said chief
executive Sofia Lindqvist. "The metals inside are too valuable and too difficult to mine to end up
in a landfill. Our process recovers more than ninety percent of them using less energy and fewer
chemicals than traditional smelting."

The company chose {city} for its new plant because of its rail connections, its supply of skilled
engineering workers and a site on a former industrial estate that can be reused without building on
open land. Greenleaf has agreed with the regional government to train local apprentices and to
publish annual figures on the plant's water use and emissions.

Residents will be able to comment on the plans at two public meetings in November, and the full
planning application, including an assessment of noise and traffic, is available at the town hall
and online.

Greenleaf Energy was founded in 2018 by a group of chemists and engineers from a university
research laboratory. It currently employs seventy people.""",
    """{CITY}, May 19 -- The {city} Museum of Science and Industry opens a new permanent gallery
this Saturday dedicated to the history of clocks and timekeeping, from water clocks and sundials to
the atomic clocks that keep mobile phone networks and satellite navigation in step.

The gallery brings together more than four hundred objects, about half of which have never been
shown to the public. Among them are a tower clock mechanism that ran in the city's old market hall
for more than a century, a set of marine chronometers used to find longitude at sea, and one of the
first quartz clocks built for a national observatory.

"Time feels like something that has always been there, but keeping it accurately was one of the
great technical problems of the last three hundred years," said curator Elena Moretti. "Railways,
telegraphs and factory shifts all depended on clocks that agreed with each other, and people in
{city} were building some of the best of them."

Visitors can wind a restored tower clock every day at noon, take apart and reassemble a simple
escapement at a workshop table, and listen to recordings of workers from the city's clock
factories, which closed in the 1980s. A section for younger visitors explains why we have time
zones, leap years and leap seconds, using games and short animations.

The gallery was designed with help from a group of retired clockmakers, who spent two years
cataloguing and repairing the collection, and who will lead guided tours on the first Sunday of
every month.

Entry to the museum and the new gallery is free, although donations are welcome. The museum is open
every day except Monday from ten in the morning until five in the afternoon.""",
)

CITIES: tuple[str, ...] = (
    "Denver",
    "Austin",
    "Lyon",
    "Manchester",
    "Rotterdam",
    "Porto",
    "Krakow",
    "Toronto",
    "Melbourne",
    "Osaka",
    "Seattle",
    "Boston",
    "Dublin",
    "Leeds",
    "Hamburg",
    "Valencia",
    "Montreal",
    "Edinburgh",
    "Pittsburgh",
    "Minneapolis",
    "Nashville",
    "San Diego",
    "Cape Town",
    "Auckland",
    "Gothenburg",
    "Bristol",
    "Adelaide",
    "Salt Lake City",
)

PRODUCT_PAGES: tuple[tuple[str, str], ...] = (
    (
        "KT",
        """Home / Kitchen / Kettles

Brightwell Stainless Steel Electric Kettle, 1.7 litres

SKU: {sku}

Price: {price} -- In stock, usually dispatched within one working day.

A kettle that boils quickly, pours cleanly and is easy to keep clean. The body is made from brushed
stainless steel with a double wall, so the outside stays cool enough to touch while the water
inside is boiling, and the water stays hot for longer after the kettle switches off.

The wide lid opens with a single button and lifts out of the way, which makes filling and descaling
easy. A removable mesh filter in the spout catches limescale, and the filter can be rinsed under
the tap or put in the dishwasher. The water window on both sides of the handle is marked in cups
and litres, so you never boil more water than you need.

Features:

Boils one litre of water in about two and a half minutes. Switches off automatically when the water
boils or if the kettle is switched on empty. Rotates freely on its base, so it can be used with
either hand. Concealed heating element that is easy to wipe clean. Cord storage underneath the
base.

Specifications: capacity 1.7 litres; power 3000 watts; cord length 75 centimetres; weight 1.3
kilograms; dimensions 22 by 16 by 25 centimetres. Supplied with a UK plug.

Delivery and returns: free standard delivery on orders over forty pounds. If you change your mind,
you can return the kettle unused in its original packaging within thirty days for a full refund.
Every kettle comes with a two-year manufacturer guarantee.""",
    ),
    (
        "BP",
        """Home / Outdoor / Backpacks

Ridgeway 30 Hiking Backpack

SKU: {sku}

Price: {price} -- Only a few left in this colour.

The Ridgeway 30 is a day pack for long walks and light scrambles, with enough room for waterproofs,
lunch, a warm layer and a water bladder. The back panel is shaped from a single piece of ventilated
foam and stands slightly away from your back, so air can move freely on warm days and your shirt
stays drier on the climb.

The main compartment opens with a curved zip that runs almost to the bottom of the pack, so you can
reach what you need without unpacking everything else. A separate lid pocket holds a map, keys and
snacks, and two stretch side pockets take water bottles that you can reach without taking the pack
off. The hip belt has padded wings and two zipped pockets large enough for a phone.

Features:

Adjustable back length to fit most walkers. Integrated rain cover stored in the base. Loops for
walking poles and an ice axe. Hydration sleeve and exit port for a drinking tube. Reflective
details for walking on roads after dark.

Specifications: volume 30 litres; weight 1.1 kilograms; main fabric recycled nylon with a
water-repellent coating that is free from fluorinated chemicals; suitable for back lengths from 42
to 52 centimetres.

Care: brush off mud once dry and wash by hand in lukewarm water with a mild soap. Do not machine
wash or tumble dry.

Delivery and returns: free delivery on orders over fifty pounds. Unused items can be returned
within sixty days. This backpack is covered by a lifetime guarantee against manufacturing
faults.""",
    ),
    (
        "CH",
        """Home / Office / Chairs

Atlas Ergonomic Office Chair with Adjustable Lumbar Support

SKU: {sku}

Price: {price} -- In stock. Assembly takes about fifteen minutes.

Designed for people who spend the whole working day at a desk, the Atlas chair supports your lower
back, keeps your feet flat on the floor and moves with you when you lean back to think or forward
to type. The seat and back are covered in a breathable mesh that does not trap heat, and the seat
cushion is shaped to take pressure off the backs of your thighs.

Almost everything can be adjusted. The lumbar support moves up and down and in and out with a
single dial, the arm rests move in four directions, and the seat slides forward and back to suit
the length of your legs. The tilt mechanism can be locked in any of five positions, and the
resistance can be set for a lighter or heavier person.

Features:

Mesh back and seat with a firm frame. Adjustable lumbar support and headrest. Four-way arm rests
with soft pads. Seat height from 44 to 54 centimetres. Nylon base with quiet wheels suitable for
carpet and hard floors.

Specifications: maximum user weight 135 kilograms; overall height 112 to 124 centimetres; seat
width 50 centimetres; weight 19 kilograms. Tested to the European standard for office seating.

In the box: chair parts, wheels, gas lift, an Allen key and illustrated assembly instructions. No
other tools are needed.

Delivery and returns: free delivery to your door within five working days. You can try the chair
for thirty nights and return it if it is not right for you. The frame and mechanism carry a
ten-year guarantee.""",
    ),
    (
        "SK",
        """Home / Cookware / Pans

Forge and Field Cast Iron Skillet, 26 centimetres

SKU: {sku}

Price: {price} -- In stock, dispatched the next working day.

A heavy pan that will last a lifetime and get better the more you cook with it. Cast iron holds
heat evenly and for a long time, so it is ideal for searing steaks, frying eggs, roasting
vegetables and baking cornbread or a flat loaf. The skillet works on gas, electric and induction
hobs, in the oven, under the grill and over a campfire.

Every skillet is seasoned at the foundry with several coats of vegetable oil baked into the
surface, so it is ready to use as soon as it arrives. With regular cooking the seasoning darkens
and becomes naturally non-stick, without the coatings used on lighter pans. The long handle has a
hole for hanging, and a helper handle on the other side makes it easier to lift a full pan with two
hands.

Features:

Pre-seasoned and ready to use. Two pouring lips for sauces and fat. Suitable for all hobs and for
ovens up to any temperature. Made from recycled iron at a family-owned foundry.

Specifications: cooking surface 21 centimetres; overall diameter 26 centimetres; depth 5
centimetres; weight 2.6 kilograms.

Care: rinse with hot water and a brush while the pan is still warm, dry it thoroughly on the hob
and wipe a few drops of oil over the surface. Avoid soaking it in water or putting it in the
dishwasher.

Delivery and returns: free delivery on orders over thirty pounds. Return unused items within thirty
days. Guaranteed for life.""",
    ),
)

# Site boilerplate wrapped around different bodies: navigation text a spider's extractor kept.
SITE_TEMPLATES: tuple[tuple[str, str], ...] = (
    (
        "Skip to main content. Python Reference Notes. Home | Tutorials | Library Reference | "
        "Language Reference | How-to Guides | Glossary | Search. You are reading the community "
        "mirror of the documentation, updated every night. Choose a version: 3.13, 3.12, 3.11 or "
        "3.10. Table of contents. Previous topic. Next topic. This page. Report a bug. Show the "
        "source.",
        "Was this page helpful? Yes or No. Thank you for your feedback. Previous topic. Next "
        "topic. Back to top. This mirror is maintained by volunteers and is not affiliated with "
        "the Python Software Foundation. Content is licensed under the terms of the original "
        "documentation. Privacy policy. Terms of use. Contact the maintainers. Last updated "
        "during the nightly build.",
    ),
    (
        "Menu. Sign in. Create a free account. Byteworks Developer Blog. Articles, tutorials and "
        "notes on programming, written by engineers for engineers. Topics: Python, Web, Data, "
        "Testing, Operations, Careers. Subscribe to the weekly newsletter and get the best "
        "articles in your inbox every Friday morning. Sponsored by our partners. Reading time "
        "about ten minutes. Share this article.",
        "Did you enjoy this article? Leave a comment below or share it with a friend. Related "
        "articles you may like. Popular this week. About Byteworks. Write for us. Advertise. "
        "Careers. Help centre. Cookie settings. We use cookies to understand how you use the "
        "site and to improve your experience. Copyright Byteworks Media. All rights reserved.",
    ),
    (
        "Department of Computer Science. Undergraduate study. Postgraduate study. Research. "
        "People. News and events. Contact us. Course materials for Introduction to Programming, "
        "second semester. Lecture notes and reading list. Students are expected to read each "
        "section before the weekly seminar. Questions about the material can be posted on the "
        "course forum or raised during office hours.",
        "These notes are provided for registered students of the university. Accessibility "
        "statement. Freedom of information. Privacy notice. Modern slavery statement. Charity "
        "information. Find us on the campus map. Follow the department on social media. The "
        "university is a registered charity. Page last reviewed at the start of the academic "
        "year.",
    ),
)

# Standard-library modules whose docstrings are read (deprecated modules are left out so
# importing them never warns). Missing modules are skipped.
_MODULE_NAMES = """
    argparse email.message email.utils email.parser email.headerregistry email.policy
    email.charset email.feedparser json json.decoder json.encoder logging logging.handlers
    logging.config typing collections collections.abc unittest.case unittest.mock
    unittest.loader http.client http.server http.cookiejar http.cookies asyncio.events
    asyncio.tasks asyncio.streams asyncio.queues asyncio.locks asyncio.base_events
    asyncio.transports asyncio.protocols pathlib urllib.parse urllib.request subprocess
    threading multiprocessing.managers concurrent.futures._base concurrent.futures.process
    functools os shutil tempfile zipfile tarfile csv fractions statistics random textwrap
    difflib string re inspect dataclasses enum abc contextlib copy pprint doctest pdb bdb trace
    timeit smtplib imaplib ftplib poplib socket ssl selectors xml.etree.ElementTree
    xml.dom.minidom xml.sax.handler configparser optparse getopt locale calendar heapq queue
    sched codecs ipaddress mailbox mimetypes base64 hmac uuid wave importlib.abc
    importlib.metadata pkgutil pydoc tokenize ast dis traceback warnings weakref numbers
    plistlib cmd code codeop sysconfig platform webbrowser wsgiref.handlers wsgiref.validate
    xmlrpc.client xmlrpc.server graphlib filecmp fileinput rlcompleter site gzip bz2 lzma
    hashlib array pstats profile socketserver
"""
DOCSTRING_MODULES: tuple[str, ...] = tuple(_MODULE_NAMES.split())

_WORD = re.compile(r"[A-Za-z][a-z]+(?:'[a-z]+)?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"(])")
_AFFIX = re.compile(r"^(\W*)(.*?)(\W*)$", re.DOTALL)
_RULE_LINE = re.compile(r"^[\s*=\-~^+#`]+$")
_PUNCTUATION = ".,;:!?()[]\"'*`\u2018\u2019\u201c\u201d"
_CODE_MARKERS = (">>>", "...", "|", "+-", "+=", "$ ", "%")

# The commonest English function words: real prose is full of them, code and lorem ipsum not.
_STOPWORDS = """
    a about above after again all also an and any are as at be because been before being
    between both but by can could did do does doing down during each few for from further had
    has have having he her here hers him his how if in into is it its itself just may might
    more most must no nor not now of off on once only or other our out over own same she
    should so some such than that the their them then there these they this those through to
    too under until up very was we were what when where which while who whom why will with
    would you your
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORDS.split())


# --------------------------------------------------------------------------------------------
# Text helpers


def words_of(text: str) -> list[str]:
    """Whitespace-separated words, the unit every count in this module uses."""
    return text.split()


def shingle_jaccard(a: str, b: str, k: int = 3) -> float:
    """Jaccard similarity of the ``k``-word shingles of lowercased, whitespace-split text."""
    sa, sb = _shingles(a, k), _shingles(b, k)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def _shingles(text: str, k: int = 3) -> set[tuple[str, ...]]:
    w = text.lower().split()
    return {tuple(w[i : i + k]) for i in range(max(1, len(w) - k + 1))} if w else set()


def n_edits(words: int, fraction: float, minimum: int = 1) -> int:
    """How many words an edit of ``fraction`` touches in a ``words``-word document."""
    return max(minimum, round(words * fraction))


def _normalize_paragraphs(text: str) -> str:
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n\s*\n", text))
    return "\n\n".join(p for p in paragraphs if p)


def _is_prose(lines: list[str]) -> bool:
    """Keep paragraphs of sentences; leave out code, grammar productions and tables."""
    stripped = [ln.strip() for ln in lines]
    if any(s.startswith(_CODE_MARKERS) or "::=" in s or "-->" in s for s in stripped):
        return False
    tokens = " ".join(stripped).split()
    if len(tokens) < 6:
        return False
    cores = [t.strip(_PUNCTUATION) for t in tokens]
    alpha = sum(1 for c in cores if c.isalpha())
    stop = sum(1 for c in cores if c.lower() in STOPWORDS)
    return alpha >= 0.8 * len(tokens) and stop >= 0.15 * len(tokens)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _prose_paragraphs(text: str) -> list[str]:
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = [ln for ln in block.splitlines() if ln.strip() and not _RULE_LINE.match(ln)]
        # An indented run after a line ending in ":" is an example or an argument table.
        for i in range(1, len(lines)):
            if lines[i - 1].rstrip().endswith(":") and _indent(lines[i]) > _indent(lines[i - 1]):
                lines = lines[:i]
                break
        if lines and _is_prose(lines):
            out.append(" ".join(" ".join(lines).split()))
    return out


def _split_long(paragraph: str, limit: int) -> list[str]:
    """Split a paragraph longer than ``limit`` words at sentence boundaries (words if need be)."""
    if len(paragraph.split()) <= limit:
        return [paragraph]
    pieces: list[str] = []
    current: list[str] = []
    for sentence in _SENTENCE_END.split(paragraph):
        sw = sentence.split()
        while len(sw) > limit:
            pieces.append(" ".join(sw[:limit]))
            sw = sw[limit:]
        if current and len(current) + len(sw) > limit:
            pieces.append(" ".join(current))
            current = []
        current.extend(sw)
    if current:
        pieces.append(" ".join(current))
    return pieces


# --------------------------------------------------------------------------------------------
# Sources


def _docstrings(module: types.ModuleType) -> Iterable[str]:
    """The module's own docstrings: module, public classes and their methods, functions."""
    if module.__doc__:
        yield module.__doc__
    routine = (types.FunctionType, types.BuiltinFunctionType)
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if isinstance(obj, type):
            if obj.__doc__:
                yield obj.__doc__
            for member_name, member in sorted(vars(obj).items()):
                if member_name.startswith("_") and member_name != "__init__":
                    continue
                if isinstance(member, (classmethod, staticmethod)):
                    member = member.__func__
                if isinstance(member, (*routine, property)) and member.__doc__:
                    yield member.__doc__
        elif isinstance(obj, routine) and obj.__doc__:
            yield obj.__doc__


@lru_cache(maxsize=1)
def _sources() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``(source name, prose paragraphs)`` for every source, each paragraph kept only once."""
    from pydoc_data.topics import topics

    raw: list[tuple[str, list[str]]] = []
    small: list[str] = []
    for key in sorted(topics):
        paragraphs = _prose_paragraphs(topics[key])
        if sum(len(p.split()) for p in paragraphs) >= 250:
            raw.append((f"langref:{key}", paragraphs))
        else:
            # Short sections of the reference are read as one source, in alphabetical order.
            small.extend(paragraphs)
    raw.append(("langref:short-sections", small))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in DOCSTRING_MODULES:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            paragraphs = []
            for doc in _docstrings(module):
                paragraphs.extend(_prose_paragraphs(inspect.cleandoc(doc)))
            raw.append((f"stdlib:{name}", paragraphs))
    for i, text in enumerate(PRESS_RELEASES):
        city = CITIES[i % len(CITIES)]
        filled = text.format(city=city, CITY=city.upper())
        raw.append((f"press:{i}", _normalize_paragraphs(filled).split("\n\n")))
    for prefix, text in PRODUCT_PAGES:
        filled = text.format(sku=f"{prefix}-1000-STD", price="£49.99")
        raw.append((f"product:{prefix}", _normalize_paragraphs(filled).split("\n\n")))

    seen: set[str] = set()
    sources = []
    for name, paragraphs in raw:
        kept = []
        for p in paragraphs:
            key = " ".join(p.lower().split())
            if key not in seen:
                seen.add(key)
                kept.append(p)
        if kept:
            sources.append((name, tuple(kept)))
    return tuple(sources)


@lru_cache(maxsize=1)
def vocabulary() -> tuple[str, ...]:
    """Lowercase words of the corpus prose used by at least three sources (so not one module's
    identifiers), sorted: the pool that replacement and inserted words are drawn from."""
    sources: dict[str, set[str]] = {}
    for name, paragraphs in _sources():
        for p in paragraphs:
            for w in _WORD.findall(p):
                if 3 <= len(w) <= 14:
                    sources.setdefault(w.lower(), set()).add(name)
    return tuple(sorted(w for w, names in sources.items() if len(names) >= 3))


def _chunks(
    paragraphs: Sequence[str], rng: random.Random, min_words: int, max_words: int
) -> list[str]:
    """Cut one source into documents of ``min_words``..``max_words`` words at paragraph (and,
    for very long paragraphs, sentence) boundaries; the target length is log-uniform."""
    pieces = [s for p in paragraphs for s in _split_long(p, max(1, (max_words - min_words) // 3))]

    def target() -> int:
        return int(min_words * (max_words / min_words) ** rng.random())

    docs: list[list[str]] = []
    current: list[str] = []
    size, goal = 0, target()
    for piece in pieces:
        n = len(piece.split())
        if current and size + n > max_words:
            # Pieces are at most a third of the range, so ``current`` already has min_words.
            docs.append(current)
            current, size, goal = [], 0, target()
        current.append(piece)
        size += n
        if size >= goal:
            docs.append(current)
            current, size, goal = [], 0, target()
    if current:
        if docs and size + sum(len(p.split()) for p in docs[-1]) <= max_words:
            docs[-1] = docs[-1] + current
        elif size >= min_words:
            docs.append(current)
    return ["\n\n".join(d) for d in docs if min_words <= len(" ".join(d).split()) <= max_words]


@lru_cache(maxsize=8)
def _documents(min_words: int, max_words: int, seed: int) -> tuple[tuple[str, str], ...]:
    """``(source, text)`` for every document, exact and near duplicates left out."""
    rng = random.Random(f"neardup-documents:{seed}")
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    # Different sources sometimes say nearly the same thing (a class and its C accelerator, a
    # function re-documented in two modules); keep only the first of such near-duplicates.
    index: dict[tuple[str, ...], list[int]] = {}
    sizes: list[int] = []
    for name, paragraphs in _sources():
        for text in _chunks(paragraphs, rng, min_words, max_words):
            key = " ".join(text.lower().split())
            if key in seen:
                continue
            shingles = _shingles(text)
            shared: dict[int, int] = {}
            for s in shingles:
                for j in index.get(s, ()):
                    shared[j] = shared.get(j, 0) + 1
            if any(c / (len(shingles) + sizes[j] - c) > 0.1 for j, c in shared.items()):
                continue
            seen.add(key)
            for s in shingles:
                index.setdefault(s, []).append(len(out))
            sizes.append(len(shingles))
            out.append((name, text))
    return tuple(out)


def documents(min_words: int = 250, max_words: int = 1500, seed: int = 0) -> list[str]:
    """Real-text documents of ``min_words``..``max_words`` words, no two of them alike."""
    return [text for _, text in _documents(min_words, max_words, seed)]


# --------------------------------------------------------------------------------------------
# Edits. A document is handled as ``[word, following whitespace]`` pairs so that every edit
# keeps the rest of the text byte for byte.


def _tokens(text: str) -> list[list[str]]:
    parts = re.split(r"(\s+)", text.strip())
    return [
        [parts[i], parts[i + 1] if i + 1 < len(parts) else ""] for i in range(0, len(parts), 2)
    ]


def _join(tokens: list[list[str]]) -> str:
    return "".join(w + s for w, s in tokens)


def _replacement(rng: random.Random, vocab: Sequence[str], old: str) -> str:
    prefix, core, suffix = _AFFIX.match(old).groups()  # type: ignore[union-attr]
    while True:
        new = rng.choice(vocab)
        if new != core.lower():
            break
    if core[:1].isupper():
        new = new.capitalize()
    return prefix + new + suffix


def swap_words(text: str, count: int, rng: random.Random, vocab: Sequence[str]) -> str:
    """Replace ``count`` words at distinct random positions with other vocabulary words."""
    tokens = _tokens(text)
    candidates = [i for i, (w, _) in enumerate(tokens) if w.strip(_PUNCTUATION).isalpha()]
    if len(candidates) < count:
        candidates = list(range(len(tokens)))
    for i in rng.sample(candidates, count):
        tokens[i][0] = _replacement(rng, vocab, tokens[i][0])
    return _join(tokens)


def insert_delete(text: str, count: int, rng: random.Random, vocab: Sequence[str]) -> str:
    """Delete ``count // 2`` words and insert the rest, at random positions."""
    tokens = _tokens(text)
    for i in sorted(rng.sample(range(len(tokens)), count // 2), reverse=True):
        _, sep = tokens.pop(i)
        if i == len(tokens) and tokens:
            tokens[-1][1] = ""
        elif i > 0 and "\n" in sep:
            tokens[i - 1][1] = sep  # keep the paragraph break
    for _ in range(count - count // 2):
        i = rng.randrange(len(tokens) + 1)
        if i == len(tokens):
            tokens[-1][1] = " "
            tokens.append([rng.choice(vocab), ""])
        else:
            tokens.insert(i, [rng.choice(vocab), " "])
    return _join(tokens)


def move_sentence(text: str, rng: random.Random) -> str:
    """Move one sentence to another place in the document (possibly another paragraph)."""
    paragraphs = [_SENTENCE_END.split(p) for p in text.split("\n\n")]
    slots = [(p, i) for p, ss in enumerate(paragraphs) for i in range(len(ss))]
    if len(slots) < 2:
        raise ValueError("need at least two sentences")
    # Prefer moving a real sentence over a one-word fragment such as "Notes:".
    slots = [(p, i) for p, i in slots if len(paragraphs[p][i].split()) >= 5] or slots
    while True:
        moved = [list(ss) for ss in paragraphs]
        p, i = rng.choice(slots)
        sentence = moved[p].pop(i)
        q = rng.randrange(len(moved))
        moved[q].insert(rng.randrange(len(moved[q]) + 1), sentence)
        result = "\n\n".join(" ".join(ss) for ss in moved if ss)
        if result.split() != text.split():  # not just a paragraph break moved
            return result


def case_whitespace(text: str, rng: random.Random) -> str:
    """Change letter case and reflow whitespace only; the words, case-folded, stay the same."""
    tokens = _tokens(text)
    mode = rng.choice(("lower", "upper_first_paragraph", "upper_words", "capitalize_words"))
    in_first = True
    for t in tokens:
        w = t[0]
        if w.isascii():
            if mode == "lower":
                w = w.lower()
            elif (mode == "upper_first_paragraph" and in_first) or (
                mode == "upper_words" and rng.random() < 0.05
            ):
                w = w.upper()
            elif mode == "capitalize_words" and rng.random() < 0.15:
                w = w[:1].upper() + w[1:]
        t[0] = w
        in_first = in_first and "\n" not in t[1]
    width = rng.randint(50, 100)
    line = 0
    for t in tokens:
        line += len(t[0]) + 1
        if "\n" in t[1]:
            t[1] = rng.choice(("\n", "\n\n", "\n\n\n", "\n \n", "\r\n\r\n"))
            line = 0
        elif t[1]:
            if line > width:
                t[1] = rng.choice(("\n", " \n"))
                line = 0
            else:
                t[1] = rng.choice((" ",) * 12 + ("  ", "\t"))
    return rng.choice(("", "\n", "  ")) + _join(tokens) + rng.choice(("", "\n", " \n"))


# --------------------------------------------------------------------------------------------
# Pairs


def _pick(rng: random.Random, items: Sequence[str], k: int) -> list[str]:
    return rng.sample(items, k) if len(items) >= k else [rng.choice(items) for _ in range(k)]


def _press_pair(rng: random.Random) -> tuple[str, str]:
    text = rng.choice(PRESS_RELEASES)
    first, second = rng.sample(CITIES, 2)
    a, b = (text.format(city=c, CITY=c.upper()) for c in (first, second))
    return _normalize_paragraphs(a), _normalize_paragraphs(b)


def _sku(rng: random.Random, prefix: str) -> str:
    colour = rng.choice(("BLK", "WHT", "GRY", "RED", "BLU", "GRN", "STD"))
    return f"{prefix}-{rng.randint(1000, 9999)}-{colour}"


def _product_pair(rng: random.Random) -> tuple[str, str]:
    prefix, text = rng.choice(PRODUCT_PAGES)
    sku_a = _sku(rng, prefix)
    sku_b = sku_a
    while sku_b == sku_a:
        sku_b = _sku(rng, prefix)
    price_a = f"£{rng.randint(19, 249)}.{rng.choice(('00', '49', '95', '99'))}"
    price_b = price_a if rng.random() < 0.5 else f"£{rng.randint(19, 249)}.99"
    a = text.format(sku=sku_a, price=price_a)
    b = text.format(sku=sku_b, price=price_b)
    return _normalize_paragraphs(a), _normalize_paragraphs(b)


def _make_pairs(kind: str, rng: random.Random, per_kind: int, seed: int) -> list[tuple[str, str]]:
    docs = _documents(250, 1500, seed)
    texts = [t for _, t in docs]
    vocab = vocabulary()
    if kind == "exact":
        return [(a, a) for a in _pick(rng, texts, per_kind)]
    if kind == "case_whitespace":
        return [(a, case_whitespace(a, rng)) for a in _pick(rng, texts, per_kind)]
    if kind in SWAP_FRACTIONS:
        fraction = SWAP_FRACTIONS[kind]
        return [
            (a, swap_words(a, n_edits(len(a.split()), fraction), rng, vocab))
            for a in _pick(rng, texts, per_kind)
        ]
    if kind == "insert_delete_2pct":
        return [
            (a, insert_delete(a, n_edits(len(a.split()), INSERT_DELETE_FRACTION, 2), rng, vocab))
            for a in _pick(rng, texts, per_kind)
        ]
    if kind == "moved_sentence":
        return [(a, move_sentence(a, rng)) for a in _pick(rng, texts, per_kind)]
    if kind == "city_swap":
        return [_press_pair(rng) for _ in range(per_kind)]
    if kind == "sku_change":
        return [_product_pair(rng) for _ in range(per_kind)]
    if kind == "unrelated":
        out = []
        for _ in range(per_kind):
            (sa, a), (sb, b) = rng.sample(docs, 2)
            while sa == sb:
                (sa, a), (sb, b) = rng.sample(docs, 2)
            out.append((a, b))
        return out
    if kind == "same_source":
        by_source: dict[str, list[str]] = {}
        for source, text in docs:
            by_source.setdefault(source, []).append(text)
        candidates = [
            (x, y)
            for chunks in by_source.values()
            for i, x in enumerate(chunks)
            for y in chunks[i + 1 :]
        ]
        picked = (
            rng.sample(candidates, per_kind)
            if len(candidates) >= per_kind
            else [rng.choice(candidates) for _ in range(per_kind)]
        )
        return [(x, y) if rng.random() < 0.5 else (y, x) for x, y in picked]
    if kind == "shared_template":
        out = []
        lengths = [len(t.split()) for _, t in docs]
        for _ in range(per_kind):
            header, footer = rng.choice(SITE_TEMPLATES)
            room = 1500 - len(header.split()) - len(footer.split())
            fitting = [d for d, n in zip(docs, lengths, strict=True) if n <= room]
            (sa, a), (sb, b) = rng.sample(fitting, 2)
            while sa == sb:
                (sa, a), (sb, b) = rng.sample(fitting, 2)
            out.append((f"{header}\n\n{a}\n\n{footer}", f"{header}\n\n{b}\n\n{footer}"))
        return out
    raise ValueError(f"unknown kind {kind!r}")


@lru_cache(maxsize=8)
def _labelled_pairs(seed: int, per_kind: int) -> tuple[Pair, ...]:
    pairs = []
    for kind in KINDS_POSITIVE + KINDS_NEGATIVE:
        rng = random.Random(f"neardup-pairs:{seed}:{kind}")
        duplicate = kind in KINDS_POSITIVE
        for a, b in _make_pairs(kind, rng, per_kind, seed):
            pairs.append(Pair(a=a, b=b, duplicate=duplicate, kind=kind, words=len(a.split())))
    return tuple(pairs)


def labelled_pairs(seed: int = 0, per_kind: int = 60) -> list[Pair]:
    """``per_kind`` pairs of every kind, grouped by kind in ``KINDS_POSITIVE + KINDS_NEGATIVE``
    order, drawn from ``documents(seed=seed)`` and the hand-written pages."""
    return list(_labelled_pairs(seed, per_kind))


def pairs_at_similarity(
    similarity: float, seed: int = 0, per_document: int = 2, within: float = 0.02
) -> list[tuple[str, str, float]]:
    """``(a, b, jaccard)``: ``per_document`` edited copies ``b`` of every document ``a`` of
    ``documents(seed=seed)`` whose 3-word-shingle Jaccard similarity to it is ``similarity``
    give or take ``within`` (words swapped at random positions; copies that miss are left out).

    ``p`` of the words swapped leave about ``(1 - p)**3`` of the shingles shared, a Jaccard
    similarity of ``s / (2 - s)`` for ``s = (1 - p)**3``: ``p`` follows from the target.
    """
    shared = 2 * similarity / (1 + similarity)
    fraction = 1 - shared ** (1 / 3)
    rng = random.Random(f"neardup-similarity:{seed}:{similarity}")
    vocab = vocabulary()
    found = []
    for a in documents(seed=seed):
        for _ in range(per_document):
            b = swap_words(a, n_edits(len(a.split()), fraction), rng, vocab)
            jaccard = shingle_jaccard(a, b)
            if abs(jaccard - similarity) <= within:
                found.append((a, b, jaccard))
    return found


def _stats(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    return "/".join(fmt(v) for v in (min(values), statistics.median(values), max(values)))


def summary(seed: int = 0, per_kind: int = 60) -> str:
    """A table of the evaluation set: pairs per kind, words in ``a`` and the 3-word-shingle
    Jaccard similarity of ``a`` and ``b`` (min/median/max)."""
    docs = _documents(250, 1500, seed)
    lengths = [len(t.split()) for _, t in docs]
    pairs = labelled_pairs(seed, per_kind)
    lines = [
        f"near-duplicate evaluation set (seed {seed}, Python {platform.python_version()}): "
        f"{len(docs)} documents from {len({s for s, _ in docs})} sources, "
        f"words min/median/max {_stats(lengths, lambda v: f'{v:.0f}')}",
        f"{'kind':<20} {'label':<9} {'pairs':>5}  {'words a':>15}  {'jaccard3':>17}",
    ]
    for kind in KINDS_POSITIVE + KINDS_NEGATIVE:
        of_kind = [p for p in pairs if p.kind == kind]
        label = "dup" if kind in KINDS_POSITIVE else "different"
        words = _stats([p.words for p in of_kind], lambda v: f"{v:.0f}")
        jac = _stats([shingle_jaccard(p.a, p.b) for p in of_kind], lambda v: f"{v:.3f}")
        lines.append(f"{kind:<20} {label:<9} {len(of_kind):>5}  {words:>15}  {jac:>17}")
    return "\n".join(lines)
