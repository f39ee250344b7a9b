"""Word lists and sentence templates for the synthetic pool (data only, no logic).

Each register has its own content vocabulary (a few hundred words) so that a small
LM and the register classifier have register-specific statistics to learn; function
words live in the templates and are shared. Templates keep fixed word runs short so
two different documents rarely share 5-word shingles (MinHash must not see them as
near-duplicates). Slots are ``{KEY}``; ``{D}`` is a number drawn by the generator.
"""
from __future__ import annotations


def _w(s: str) -> list[str]:
    return s.split()


NEWS: dict[str, list[str]] = {
    "N": _w(
        "government minister council election budget economy inflation parliament police"
        " court investigation company market strike union protest agreement treaty sanctions"
        " spokesperson lawmakers senator mayor governor cabinet coalition opposition referendum"
        " ballot campaign candidate voters poll deficit tariff exports imports factory workers"
        " wages pension reform bill legislation ruling verdict trial suspect prosecutors ministry"
        " embassy ambassador summit talks ceasefire troops border refugees flooding wildfire"
        " earthquake storm evacuation hospital outbreak vaccine airline airport railway tanker"
        " pipeline refinery bank regulator watchdog merger acquisition profit earnings quarter"
        " forecast revenue shareholders chairman executive startup lender bonds currency rally"
        " slump index investors stadium tournament coach striker championship inquiry subsidy"
        " contract dispute delegation commission tribunal agency authorities residents"
    ),
    "V": _w(
        "announced confirmed rejected approved criticised blocked delayed postponed unveiled"
        " launched backed opposed suspended investigated charged arrested cited dismissed"
        " welcomed condemned reversed extended raised lowered signed ratified overturned"
        " defended secured pledged halted resumed ordered urged"
    ),
    "VB": _w(
        "approve reject delay block review announce extend suspend raise lower sign resume"
        " halt investigate challenge overturn finalise renegotiate"
    ),
    "VS": _w("said told warned added noted stated insisted argued claimed acknowledged"),
    "VP": _w("evacuated displaced detained injured rescued questioned relocated stranded"),
    "A": _w(
        "senior federal regional national annual emergency interim former acting preliminary"
        " controversial landmark widespread sweeping unexpected record sharp steady modest"
        " fragile disputed official independent local foreign domestic economic political"
        " military judicial financial quarterly bipartisan provisional"
    ),
    "P": _w(
        "Keller Okafor Lindqvist Moreau Haddad Novak Tanaka Brennan Castillo Varga Osei Petrov"
        " Sandoval Whitfield Abara Nakamura Delacroix Rossi Fitzgerald Mensah Kowalski Ibrahim"
        " Larsen Quintero Sato"
    ),
    "TITLE": _w("Minister Senator President Governor Mayor Judge Inspector Chancellor Commissioner"),
    "L": _w(
        "Brussels Nairobi Lisbon Ottawa Manila Lagos Geneva Santiago Hanoi Warsaw Dublin Accra"
        " Canberra Oslo Lima Cairo Jakarta Seoul Vienna Athens Madrid Helsinki Bogota Dakar Riga"
    ),
    "DAY": _w("Monday Tuesday Wednesday Thursday Friday Saturday Sunday"),
    "MON": _w("January February March April May June July August September October November December"),
}

NEWS_TEMPLATES: list[str] = [
    "{TITLE} {P} {VS} the {N} would not affect the {A} {N}.",
    "The {N} {V} the {A} {N} on {DAY}, according to {A} sources.",
    "Officials in {L} {V} a {A} {N} after the {N} {V} the {N}.",
    "Shares in the {N} fell {D} percent in early trading in {L}.",
    "{P}, a {A} {N} adviser, {VS} the {N} was {A} and {A}.",
    "The {N} is expected to {VB} the {A} {N} by {MON}.",
    "It was not immediately clear whether the {N} would {VB} the {N}.",
    "In a statement, the {N} {VS} it had {V} the {A} {N}.",
    "The {A} {N} comes amid {A} {N} over the {N}.",
    "At least {D} residents were {VP} as the {N} hit {L}.",
    "{P} {VS} reporters in {L} that the {N} remained {A}.",
    "The {N} {V} its {A} {N} for the {A} quarter.",
    "Critics {VS} the {N} {V} the {N} without a {A} {N}.",
    "{TITLE} {P} is due to meet {TITLE} {P} in {L} on {DAY}.",
    "Analysts {VS} the {A} {N} could {VB} the {N} by {D} percent.",
    "Talks between the {N} and the {N} are set to resume in {MON}.",
    "The {N} has been {V} since {MON}, {P} {VS}.",
    "A {A} {N} in {L} {V} the {N} late on {DAY}.",
    "The {N} {V} a {A} {N} worth {D} million.",
    "{P} {V} the {N}, calling it a {A} {N}.",
]

ENCYCLOPEDIC: dict[str, list[str]] = {
    "N": _w(
        "species genus region river valley mountain plateau coast island century dynasty empire"
        " kingdom language dialect population settlement parish province district compound"
        " element molecule mineral crystal alloy theorem equation manuscript cathedral monastery"
        " fortress temple architecture sculpture painter composer poet philosopher astronomer"
        " mathematician botanist physician treatise chronicle inscription artefact excavation"
        " fossil sediment glacier basin delta estuary climate rainfall vegetation habitat"
        " predator plumage leaf flower seed root bark fungus organism enzyme protein cell tissue"
        " orbit comet nebula galaxy telescope calendar trade colony republic constitution monarch"
        " successor tribe clan ritual festival harbour canal aqueduct locomotive instrument"
        " orchestra opera symphony lineage taxonomy specimen archipelago peninsula tributary"
        " alphabet script doctrine"
    ),
    "VZ": _w(
        "contains includes comprises forms produces describes denotes resembles occupies"
        " surrounds supports features borders covers connects represents influences spans"
        " preserves encompasses"
    ),
    "VPP": _w(
        "founded established described named built discovered classified recorded documented"
        " introduced translated restored abandoned annexed rebuilt designed excavated catalogued"
        " consecrated fortified"
    ),
    "A": _w(
        "northern southern eastern western central coastal alpine tropical temperate arid ancient"
        " medieval classical early late primary secondary notable distinctive characteristic"
        " common rare endemic native extinct volcanic sedimentary metallic organic aquatic"
        " terrestrial nocturnal migratory ornamental liturgical vernacular administrative"
        " hereditary agricultural monumental"
    ),
    "P": _w(
        "Hallern Baptiste Ferreira Ostrowski Eriksen Marchetti Villiers Albrecht Szabo Cardenas"
        " Holm Rahman Demir Lindgren Caruso Thorne Vasquez Okonkwo Beaumont Halvorsen"
    ),
    "L": _w(
        "Anatolia Patagonia Bohemia Flanders Bengal Andalusia Transylvania Silesia Galicia"
        " Mesopotamia Cappadocia Moravia Tuscany Catalonia Punjab Manchuria Siberia Bavaria"
        " Lombardy Macedonia"
    ),
    "SEC": _w("History Description Etymology Distribution Legacy Classification Geography Culture"),
}

ENCYCLOPEDIC_TEMPLATES: list[str] = [
    "The {N} is a {A} {N} native to {L}.",
    "It {VZ} a {A} {N} and several {A} forms of {N}.",
    "In {Y}, the {N} was {VPP} by {P}.",
    "The {N} of {L} {VZ} the {A} {N}.",
    "According to {P}, the {N} {VZ} a {A} {N}.",
    "The name is derived from the {A} word for {N}.",
    "It is considered one of the most {A} examples of {A} {N}.",
    "During the {A} period, the {N} was {VPP} as a {N}.",
    "The {A} {N} {VZ} an area of approximately {D} square kilometres.",
    "{P} later {VPP} the {N} in a treatise on the {N}.",
    "Its {N} is typically {A}, with a {A} {N}.",
    "The {N} was {VPP} in {Y} and {VPP} in {Y}.",
    "Several {A} forms of {N} are found in the {A} {N} of {L}.",
    "The {N} is closely related to the {N} of {L}.",
    "It is distinguished from the {N} by its {A} {N}.",
    "The population of the {N} was estimated at {D} thousand in {Y}.",
    "Scholars such as {P} regard the {N} as {A}.",
    "The {A} {N} {VZ} the {N} and the {A} {N}.",
]

QA: dict[str, list[str]] = {
    "N": _w(
        "file folder setting error driver password account cable battery router printer laptop"
        " keyboard screen browser extension database table query column script function variable"
        " loop package library dependency server port firewall permission backup partition disk"
        " recipe oven dough yeast flour sauce pan thermostat faucet drain hinge drill screw"
        " bracket tire bike chain lawn soil fertilizer visa passport invoice receipt loan mortgage"
        " spreadsheet formula shortcut cache cookbook grout sealant adapter charger"
    ),
    "VB": _w(
        "install reset configure update remove delete restore export import replace fix clean"
        " check enable disable connect rename convert merge sort filter format repair adjust"
        " measure bake season tighten loosen reinstall unplug calibrate"
    ),
    "VING": _w(
        "installing resetting configuring updating removing deleting restoring exporting"
        " replacing checking enabling disabling connecting renaming converting running opening"
        " closing restarting clearing"
    ),
    "A": _w(
        "default hidden corrupted missing slow broken new old blank wrong empty custom shared"
        " external internal wireless encrypted compressed temporary outdated loose"
    ),
    "TOOL": _w("Windows Linux Excel Python Chrome Firefox Android Photoshop Git MySQL macOS Word"),
}

QA_QUESTIONS: list[str] = [
    "How do I {VB} the {N} in {TOOL}?",
    "Why does my {N} keep showing a {A} {N}?",
    "Is it safe to {VB} a {A} {N} without {VING} the {N} first?",
    "What is the best way to {VB} a {A} {N}?",
    "Can I {VB} the {N} after {VING} the {N}?",
]
QA_DETAILS: list[str] = [
    "I tried {VING} the {N} but the {N} is still {A}.",
    "The {N} worked fine until I started {VING} the {N}.",
    "I am using {TOOL} and the {N} looks {A}.",
    "Any advice on the {A} {N} would be appreciated.",
]
QA_ANSWERS: list[str] = [
    "You can {VB} the {N} by {VING} the {A} {N}.",
    "First, open the {N} and select the {A} {N}.",
    "If the {N} is {A}, try {VING} it.",
    "This usually happens when the {N} is {A}.",
    "Make sure the {N} is {A} before you {VB} the {N}.",
    "Then {VB} the {N} and {VB} the {N} again.",
    "Step {D}: {VB} the {A} {N}.",
    "Edit: {VING} the {N} fixed it for me.",
    "Note that {VING} the {N} will {VB} any {A} {N}.",
    "In my experience the {A} {N} works better than the {N}.",
    "Do not {VB} the {N} while {VING} the {N}.",
    "In {TOOL} you can {VB} it from the {A} {N} menu.",
]

FORUM: dict[str, list[str]] = {
    "N": _w(
        "build game patch server mod team match rig setup gpu cpu fps league season skin"
        " loadout map ranked queue lobby stream clip meme thread post admin ban noob squad guild"
        " raid boss loot drop nerf buff meta controller headset mouse monitor console framerate"
        " lag ping tournament fanbase album band track concert playlist show episode finale"
        " spoiler character plot theory dlc sequel trailer leak roster"
    ),
    "VB": _w(
        "love hate try play buy sell grind stream watch skip nerf buff carry quit join main spam"
        " upgrade rewatch preorder"
    ),
    "A": _w(
        "awesome terrible laggy broken insane cursed goated mid solid sketchy overpowered"
        " underrated overrated clunky smooth janky cheap pricey decent weird sick wild"
    ),
    "INTJ": _w("lol lmao tbh imo idk ngl smh fr omg yeah nah welp bruh"),
    "U1": _w("dark pixel frost shadow turbo lazy retro neon void salty crispy silent toxic mega"),
    "U2": _w("wolf gamer panda ninja fox cat knight mage goblin toast potato viking"),
}

FORUM_TEMPLATES: list[str] = [
    "{INTJ} the new {N} is so {A}",
    "anyone else think the {N} is kinda {A}?",
    "i {VB} this {N} {INTJ}",
    "just {VB} the {N} and {VB} the {N}, works every time",
    "{INTJ} {USER} ur {N} is {A}",
    "honestly the {N} has been {A} since the last {N}",
    "my {N} keeps crashing when i {VB} the {N}",
    "+{D} for the {A} {N}",
    "idk man the {A} {N} feels {A} to me",
    "ngl id {VB} the {N} over the {N} any day",
    "who else is gonna {VB} the {N} this weekend",
    "{A} {N} > {A} {N}, change my mind",
    "this thread is {A} {INTJ}",
    "@{USER} the {N} is {A} {INTJ}",
    "cant wait to {VB} the {N} with the {N}",
]

NOISE_BOILERPLATE: list[str] = [
    "We use cookies to improve your experience. By continuing to browse you agree to our use of cookies.",
    "Accept all cookies | Manage preferences | Reject non-essential",
    "Home | About us | Contact | Subscribe | Login",
    "Copyright 2021 All rights reserved. Privacy Policy | Terms of Use",
    "Subscribe to our newsletter for the latest updates.",
    "This site uses cookies. Read our privacy policy to learn more.",
    "Share on Facebook | Share on Twitter | Email this page",
    "JavaScript is disabled in your browser. Please enable JavaScript to continue.",
]
NOISE_REPEATED: list[str] = [
    "Click here to download now",
    "Buy cheap watches online best price",
    "Loading more results please wait",
    "Best deals of the day click to see more",
    "Sign up today and get free shipping",
]
NOISE_SHORT: list[str] = [
    "Page not found.",
    "Loading...",
    "404 error: the requested page could not be found.",
    "Coming soon.",
    "Under construction, check back later.",
    "Access denied.",
]
JUNK_TOKENS: list[str] = _w(
    "## $$ %% && || :: == >> << -- ++ ** ~~ ... [] {} () 0x3f 0xff 404 1337 2048 99.9 12.5%"
    " $19.99 #1 #42 @@ ;; // \\\\ |-| =>"
)

# ---- the web pool's junk and off-register pages (issue 51.4; shares: ingest.noise_weights) ----
# Built almost only from words the clean registers and the old noise lines already use: the pipeline trains its
# BPE on the pool, and every new word takes vocabulary entries (a wider output layer: slower pretraining, SFT
# and generation; docs/findings/curation_pool.md).
# Navigation pages: a menu bar (site sections, places, months, products), a teaser, link lists and the banner
# and footer lines of NOISE_BOILERPLATE (nine pages in ten carry one; the rest are link farms the filters miss).
NAV: list[str] = _w("Home About Contact Subscribe Login") + NEWS["L"] + NEWS["MON"] + QA["TOOL"]
NAV_LINES: list[str] = [
    "Read more", "Loading more results please wait", "Click here to see more", "Sign up today",
    "Best deals of the day click to see more", "Share on Facebook | Share on Twitter | Email this page",
]
# Spam pages built from repeated lines (repeated_lines) and keyword stuffing (repeated_ngrams), on the target
# registers' own nouns, as spam rides on real topics.
SPAM_LINES: list[str] = [
    "Buy cheap {N} online best price", "Best {N} deals of the day click to see more",
    "Click here to download {N} now", "Sign up today and get free {N}", "Buy {N} online now and get free shipping",
    "Loading more {N} please wait",
]
STUFFING_PHRASES: list[str] = [
    "cheap {N} online", "best {N} price", "buy {N} online", "{N} deals", "free {N} shipping", "best cheap {N}",
    "{N} online now", "cheap {N} today",
]
# Off-register web text: well-formed English pages in registers the target does not have (shop listings and
# affiliate listicles). No filter targets them; the register classifier does (its background class). Their goods,
# brands and adjectives are their own (a shop that sold the qa and forum registers' products under the news
# registers' names made the filtered arm worse than raw random: docs/findings/curation_pool.md), kept few, as each
# new word costs BPE entries; the sentence frames use words the clean registers already have.
SHOP: dict[str, list[str]] = {
    "BR": _w("Zentro Kalora Novix Vexa Orvio Lumina Brisk Nimbus Rivet Tundra"),
    "PN": _w("jacket sneakers backpack blender headphones lamp kettle sofa mug boots tent wallet"),
    "A": _w("premium lightweight waterproof compact portable durable black white red blue"),
    "MON": NEWS["MON"], "DAY": NEWS["DAY"],
}
SHOP_TEMPLATES: list[str] = [
    "Buy the {A} {PN} online today and get free shipping.",
    "Best price on the {BR} {PN}: {D} percent off.",
    "The {BR} {PN} is on sale until {MON}.",
    "In stock: the {A} {PN}, {D} percent off.",
    "Get the {A} {PN} for {D} percent off.",
    "Ships in {D} days from the {BR} store.",
    "Free shipping on every {PN} until {DAY}.",
    "Price drop: {D} percent off the {A} {PN}.",
    "Buy the {PN} with the {A} {PN} and get {D} percent off.",
    "Click here to see more deals on the {BR} {PN}.",
]
SEO_TEMPLATES: list[str] = [
    "We tested every {PN} on the market.",
    "The {BR} {PN} feels {A} and the price is right.",
    "It is worth the price, and shipping is free.",
    "Read our review of the {BR} {PN} before you buy.",
    "Click here to see the latest price.",
    "We found the {BR} {PN} {A} and the {PN} {A}.",
    "The {BR} {PN} is the best {PN} online.",
    "You can buy it online for {D} percent off until {MON}.",
    "The {A} {PN} is the one to buy this season.",
    "Best {PN} deals of the day are here.",
    "Our pick for {MON}: the {A} {PN} from {BR}.",
    "Buy it now and get free shipping on the {PN}.",
]
# A language the target is not written in (a pseudo-language: syllables -> words, built without randomness):
# the text of half the broken-encoding pages.
_SYL = _w("ka ve lo mi tu ra ne so di pa ze ko bu li ga ho ja re ni fo")
FOREIGN: dict[str, list[str]] = {
    "FN": [a + b + "n" for a in _SYL[:14] for b in _SYL[6:20]][::2],
    "FV": [a + b + "t" for a in _SYL[4:18] for b in _SYL[:10]][::3],
    "FA": [a + "k" + b for a in _SYL[10:20] for b in _SYL[:12]][::3],
    "FP": [a.capitalize() + b + "sa" for a in _SYL[:10] for b in _SYL[10:16]][::3],
}
FOREIGN_TEMPLATES: list[str] = [
    "{FN} {FV} te {FA} {FN}.",
    "Ja {FN} {FV} na {FN} ol {FN}.",
    "{FA} {FN} si {FV} un {FN}, vo {FN} {FV}.",
    "{FP} {FV} ek {FN} de {FA} {FN}.",
    "Na {FN} te {FP} {FV} {FA}.",
    "Ol {FA} {FN} {FV} si {FN} un {FN} de {FP}.",
    "{FN} de {FN} {FV} te {D} {FN}.",
]
# Broken encodings: the letters of a Cyrillic-script page before its UTF-8 is read as cp1252.
CYRILLIC: dict[str, str] = dict(zip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                                   "абцдефгхийклмнопярстужвьызАБЦДЕФГХИЙКЛМНОПЯРСТУЖВЬЫЗ"))
