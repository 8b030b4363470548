"""Rebuild the packaged larger object vocabulary, ``src/capaudit/data/lexicons/visual_objects.txt``.

    pip download --no-deps ultralytics -d /tmp/u && unzip -q /tmp/u/ultralytics-*.whl \
        'ultralytics/cfg/datasets/*' -d /tmp/u
    PYTHONPATH=src python tools/build_visual_objects.py /tmp/u/ultralytics/cfg/datasets

The category names of four detection / segmentation vocabularies, as the ``ultralytics``
wheel lists them in its dataset YAMLs (``names:``): COCO's 80 first (with CHAIR's synonym
list, so a COCO word keeps its COCO category), then LVIS v1 (1,203 categories, synonyms
separated by ``/``), Objects365 (365), Open Images V7 (601) and ADE20K (150 scene-parsing
classes: sky, tree, wall, grass, road ...). Each is a class that annotators boxed or
segmented in photos, which is the vocabulary's rule for *a visual object*: a concrete noun
that can be depicted and located. Words that would decide nothing or mislead are left out
(:data:`EXCLUDED`, documented in docs/filters.md): generic words (thing, object, area, scene,
image, side, part, top, front ...), body parts (a person's hand, face, hair: present whenever
the person is), colour words that are also fruit or materials (orange, lime, gold), and
frequent verbs or function words that a table look-up cannot tell from the noun (can, saw,
watch, stand, swing, slide, wave, fly, light), and nouns descriptions use mostly as figures
of speech (heart: "in the heart of the image"; palette, tapestry).

Rules: names lowercased, ``_`` and ``-`` read as spaces, parenthesised notes dropped, every
word singularized as corrected mode reads captions (``singularize_corrected``), entries of
more than three words dropped; a word keeps the first category that claimed it, and a
later vocabulary's category whose name is already a word of an earlier one joins it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "capaudit" / "data" / "lexicons" / "visual_objects.txt"
PARENTS_OUT = OUT.with_name("visual_objects_parents.txt")
PARTS_OUT = OUT.with_name("visual_objects_parts.txt")
SOURCES = ("lvis.yaml", "Objects365.yaml", "open-images-v7.yaml", "ade20k.yaml")

GENERIC = {"thing", "object", "item", "area", "scene", "image", "picture", "background",
           "side", "part", "top", "front", "back", "view", "photo", "photograph", "shot",
           "stuff", "piece", "set", "pair", "group", "bunch", "lot", "kind", "type", "other",
           "base", "edge", "corner", "middle", "center", "line", "shape", "pattern", "surface",
           "material", "structure", "equipment", "accessory", "product", "tool", "toy", "land",
           "earth", "ground", "world", "place", "space", "field", "container", "decoration",
           "device", "appliance", "fixture", "cover", "case", "holder", "stand", "display",
           "panel", "frame", "bar", "block", "column", "post", "step", "light", "figure",
           "model", "art", "artwork"}
BODY = {"face", "hand", "head", "hair", "eye", "ear", "nose", "mouth", "arm", "leg", "foot",
        "finger", "beard", "mustache", "moustache", "tooth", "teeth", "human body",
        "human face", "human hand", "human head", "human hair", "human eye", "human ear",
        "human nose", "human mouth", "human arm", "human leg", "human foot", "human beard",
        "tail", "body", "skin", "neck", "shoulder", "knee", "lip", "paw", "wing", "horn"}
COLOURS = {"orange", "lime", "olive", "peach", "cream", "gold", "silver", "chocolate",
           "coral", "plum", "cherry", "tan", "navy", "ivory", "lemon", "mint", "salmon",
           "wine", "rose", "lavender", "lilac", "violet"}
HOMOGRAPHS = {"can", "saw", "watch", "swing", "slide", "wave", "fly", "drink", "lead",
              "match", "rest", "fan", "bow", "pitch", "pitcher", "iron", "seal", "crane",
              "date", "file", "bank", "trunk", "pop", "spread", "play", "walk", "run",
              "ride", "cross", "stamp", "roll", "pad", "tape", "glass", "wood", "paper",
              "plastic", "metal", "stone", "steam", "shade", "shadow", "reflection", "press",
              "punch", "shift", "spring", "fall", "train set", "jack", "monitor", "overall",
              "leather", "control", "range", "tag", "key", "handle", "ram", "stage", "pet",
              "human", "nut", "wood", "present", "tie rack", "fall", "mark", "note"}
#: nouns that descriptions use mostly as figures of speech, not for a thing in the picture:
#: "in the heart of the image" (291 of the 308 "heart"s in the ShareGPT4V and LLaVA
#: descriptions of ../shared), "a muted colour palette", "a rich tapestry of textures"
FIGURATIVE = {"heart", "palette", "tapestry"}
EXCLUDED = GENERIC | BODY | COLOURS | HOMOGRAPHS | FIGURATIVE
#: concrete nouns common in captions that none of the four lists names (added last)
SUPPLEMENT = ["sign, street sign, road sign, traffic sign", "street, roadway", "cloud",
              "snow", "sand", "rock, boulder", "sun", "moon", "smoke", "fire, flame",
              "hill", "forest", "bush, shrub", "leaf", "branch", "flower", "shore",
              "beach", "ocean", "lake", "river", "track, railroad track, rail", "sidewalk",
              "pavement", "crowd", "jeans", "uniform",
              "building, buildings", "tower", "bridge", "pole", "wire", "cable"]

#: the hierarchy (hand-written): ``parent: child, ...``; names resolved to categories, a name
#: the vocabulary lacks is left out
PARENTS = """\
animal: dog, cat, horse, sheep, cow, elephant, bear, zebra, giraffe, bird, mammal, fish, insect, reptile, monkey, deer, goat, pig, rabbit, mouse, lion, tiger, duck, goose, chicken, pony, camel, fox, squirrel, kangaroo, bull, calf, lamb, puppy, kitten
bird: duck, goose, chicken, pigeon, seagull, parrot, owl, eagle, swan, penguin, crow, sparrow, turkey, flamingo
vehicle: car, truck, bus, motorcycle, bicycle, train, airplane, boat, van, taxi, ambulance, tractor, scooter, tram, helicopter, cart, wagon, jeep, trailer, fire engine, limousine, golf cart, minivan, pickup truck
boat: ship, canoe, kayak, sailboat, yacht, ferry, rowboat, gondola
furniture: chair, couch, bed, dining table, bench, desk, cabinet, shelf, bookcase, stool, wardrobe, dresser, armchair, table, sofa, ottoman, nightstand, drawer, chest of drawers, coffee table, cupboard
food: pizza, sandwich, hot dog, donut, cake, banana, apple, orange, broccoli, carrot, fruit, vegetable, bread, meat, cheese, egg, salad, soup, rice, noodle, pasta, cookie, pie, muffin, burger, hamburger, french fry, sausage, bacon, steak, chicken, fish, dessert, cupcake, pastry, tomato, potato, lettuce, onion, pepper, corn, mushroom, strawberry, grape, lemon, pineapple, watermelon, peach, pear, cherry, berry, sushi, taco, bagel, croissant, waffle, pancake, ice cream
fruit: banana, apple, orange, grape, strawberry, lemon, pineapple, watermelon, peach, pear, cherry, berry, mango, kiwi fruit, avocado, melon, plum, blueberry, raspberry, lime
vegetable: broccoli, carrot, tomato, potato, lettuce, onion, pepper, corn, mushroom, cucumber, cabbage, zucchini, celery, spinach, asparagus, bell pepper, cauliflower, pumpkin
clothing: shirt, jacket, coat, dress, hat, cap, jeans, pant, short, skirt, sweater, suit, tie, scarf, glove, sock, shoe, boot, sneaker, sandal, uniform, vest, hoodie, helmet, belt, t shirt, jersey, apron, sweatshirt, sunglass, backpack, handbag
plant: tree, flower, bush, grass, palm tree, potted plant, houseplant, cactus, leaf, branch, fern
building: house, skyscraper, tower, church, barn, castle, tent, shed, lighthouse, cabin, hut, apartment
person: man, woman, child, boy, girl, baby, player, rider
container: bottle, cup, bowl, vase, jar, basket, bag, box, bucket, can, mug, pot, pan, tray, wine glass
"""


def yaml_names(path: Path) -> list[str]:
    import yaml

    return list(yaml.safe_load(path.read_text(encoding="utf-8"))["names"].values())


def clean(entry: str, sing) -> str | None:
    text = re.sub(r"\(.*?\)", " ", entry.lower()).replace("_", " ").replace("-", " ")
    words = [w for w in re.split(r"[^a-z0-9']+", text) if w]
    if not words or len(words) > 3 or words[0] == "other":
        return None
    joined = " ".join(sing(w) for w in words)
    return None if joined in EXCLUDED or " ".join(words) in EXCLUDED else joined


def build(datasets: Path) -> list[list[str]]:
    from capaudit.text.singularize import singularize_corrected as sing
    from capaudit.text.objects import synonyms_path

    cats: list[list[str]] = []
    owner: dict[str, int] = {}

    def add(entries: list[str]) -> None:
        entries = [e for e in dict.fromkeys(entries) if e]
        if not entries:
            return
        ci = owner.get(entries[0])
        if ci is None:
            ci = len(cats)
            cats.append([entries[0]])
            owner[entries[0]] = ci
        for e in entries[1:]:
            if e not in owner:
                owner[e] = ci
                cats[ci].append(e)

    for line in synonyms_path().read_text(encoding="utf-8").splitlines():
        add([e.strip().lower() for e in line.split(",") if e.strip()])  # CHAIR's, as corrected
    for source in SOURCES:
        for name in yaml_names(datasets / source):
            add([clean(e, sing) for e in name.split("/")])
    for line in SUPPLEMENT:
        add([" ".join(sing(w) for w in e.split()) for e in line.split(", ")])
    return cats
#: the parts of a whole (hand-written): ``whole: part, ...``, the parts a picture holds
#: whenever it holds the whole (a building's windows, a car's wheels, a laptop's screen, a
#: tree's leaves); only parts outside COCO's 80, which the CHAIR ground truth judges
PARTS = """\
building: window, door, porch
house: window, door, porch
train: window, door, wheel
bus: window, door, wheel, tire, headlight, license plate
car: window, door, wheel, tire, headlight, license plate
truck: window, door, wheel, tire, headlight, license plate
motorcycle: wheel, tire, headlight, license plate
bicycle: wheel, tire
airplane: window, door, wheel
tv: screen
laptop: screen
computer monitor: screen
cell phone: screen
tree: leaf, branch
potted plant: leaf
"""


def parents(cats: list[list[str]], text: str = PARENTS) -> list[str]:
    """``head: name, ...`` lines over category names (synonyms resolved to their category);
    a head must be a category's own name (CHAIR lists "container" as a synonym of bowl: a
    "container:" line would make every container a kind of bowl)."""
    owner = {e: c[0] for c in cats for e in c}
    lines = []
    for line in text.splitlines():
        parent, _, kids = line.partition(":")
        top = owner.get(parent.strip())
        if top != parent.strip():
            continue
        found = [owner[k.strip()] for k in kids.split(",") if k.strip() in owner]
        found = [k for k in dict.fromkeys(found) if k != top]
        if top and found:
            lines.append(f"{top}: {', '.join(found)}\n")
    return lines


def main() -> None:
    cats = build(Path(sys.argv[1]))
    PARENTS_OUT.write_text("".join(parents(cats)), encoding="utf-8")
    PARTS_OUT.write_text("".join(parents(cats, PARTS)), encoding="utf-8")
    OUT.write_text("".join(", ".join(c) + "\n" for c in cats), encoding="utf-8")
    print(f"{len(cats)} categories, {sum(map(len, cats))} entries -> {OUT}")


if __name__ == "__main__":
    main()
