"""What a request names by its shape rather than its words, for the search index
(``words.py`` reads a request's words around them): coordinates, a URL, a file name (an
image, audio or video file by its extension), a path, an owner/repo, a #channel, an
@user, an :emoji:, a quoted or "called …" value, a KEY=value, two numbers to add, SQL
said in words, a width × height, a namespaced key. Each span is read as the one word it
stands for, or none (a value), and the word says which arguments the value fills
(``vocabulary.FILLS``). Pure functions and compiled patterns.
"""

from __future__ import annotations

import re

# What a request names by its shape rather than its words: coordinates, a URL, a file
# name (an image file by its extension), a path, an owner/repo, a #channel, an @user,
# an :emoji:, a quoted or "called …" value, a KEY=value, two numbers to add, SQL said
# in words. The words inside ("notes/todo.md", "example.com", 'Crash on save',
# "kubernetes/kubernetes") are names, not what the request is about, so the span is
# read as the one word it stands for, or none (a value: quoted, KEY=value, owner/repo);
# the word also says which arguments the value fills (``vocabulary.FILLS``). Each
# pattern runs only if its text holds one of the characters it needs.
_VALUE = {"slug": "", "key": "key_value"}  # shape word → what the text says instead, where not the word itself
_SHAPES = (
    (
        "'\"‘“",
        re.compile(r"(?<![\w])(?:'[^'\n]{1,80}'|\"[^\"\n]{1,80}\"|‘[^’\n]{1,80}’|“[^”\n]{1,80}”)(?![\w])"),
        "",
    ),  # 'Crash on save': a value
    (
        "d",
        re.compile(r"\b(?:called|named|titled) [\w.:/-]+", re.IGNORECASE),
        "name",
    ),  # "a configmap called app-settings"
    (
        ",",
        re.compile(r"(?<![\w.])[-+]?\d{1,3}\.\d+°?\s*[NS]?\s*,\s*[-+]?\d{1,3}\.\d+°?\s*[EW]?(?![\w.])"),
        "coordinates",
    ),  # "40.71, -74.00"
    (
        ".",
        re.compile(
            r"\b(?:https?|ftp)://\S+|\bwww\.\S+|(?<![\w@/.])[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|io|dev|ai|app|co|edu|gov)(?:/\S*)?(?![\w.])",
            re.IGNORECASE,
        ),
        "url",
    ),
    (
        ".",
        re.compile(r"(?<![\w@])(?:~|\.{1,2})?(?:/?[\w*~-]+)*/?[\w*-]*[\w*]\.[A-Za-z][A-Za-z0-9]{0,3}(?!\w|\.\w)"),
        "file",
    ),  # "… todo.md." too
    (".", re.compile(r"(?<![\w.])\.[A-Za-z][A-Za-z0-9]{0,3}(?![\w.])"), "file"),  # ".log", as in "every .log file"
    ("/", re.compile(r"(?<![\w])(?:~|\.{1,2})?/[\w.*-]+(?:/[\w.*-]*)*"), "path"),
    (
        "/",
        re.compile(r"(?<![\w/.~-])[A-Za-z][\w.-]*(?:/[\w.-]*[A-Za-z][\w.-]*)+(?![\w/])"),
        "slug",
    ),  # owner/repo, group/project
    ("#", re.compile(r"(?<![\w&])#[A-Za-z][\w-]*"), "channel"),
    ("@", re.compile(r"(?<![\w])@[A-Za-z][\w.-]*"), "user"),
    (":", re.compile(r"(?<![\w:]):[a-z0-9_+-]{2,30}:(?![\w:])"), "emoji"),  # ":tada:"
    (
        "tT",
        re.compile(r"\bselect\b(?=[^.?!]{1,80}\bfrom\b[^.?!]{0,40}\btables?\b)", re.IGNORECASE),
        "sql query",
    ),  # SQL said in words
    (
        "0123456789",
        re.compile(r"(?<![\w.,])-?\d+(?:\.\d+)?\s*(?:\+|plus|and)\s*-?\d+(?:\.\d+)?(?![\w.,])"),
        "sum",
    ),  # "17 and 25"
    (
        "xX×",
        re.compile(r"(?<![\w.])\d{2,5}\s*[xX×]\s*\d{2,5}(?:\s*px)?(?![\w.])"),
        "dimensions",
    ),  # "375x812": a width and height
    ("-", re.compile(r"\bto-dos?\b", re.IGNORECASE), "todo"),
    (
        ":",
        re.compile(
            r"(?<![\w/:.@-])(?=[A-Za-z][\w.-]*:[\w.-]*[A-Za-z*])(?![\w.-]+:(?:latest|stable|alpine|slim|lts|edge)\b)[A-Za-z][\w.-]*(?::[\w.*-]+)+(?![\w:/])"
        ),
        "key",
    ),  # "session:abc", "lock:job:17": a namespaced key (not an image tag, "nginx:latest")
    ("=", re.compile(r"(?<![\w=])[\w.-]+=[\w.:/-]*"), ""),  # "LOG_LEVEL=debug", "app=canary": a value, no word
)


_IMAGES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg", ".bmp", ".ico", ".tif", ".tiff")
_AUDIO = (".mp3", ".wav", ".ogg", ".flac", ".m4a", ".aac", ".opus")
_VIDEO = (".mp4", ".mov", ".webm", ".mkv", ".avi")


def _file_word(name: str) -> str:
    """What a file name stands for: an image, audio or video file (media), or a file."""
    name = name.lower()
    kind = (
        "image"
        if name.endswith(_IMAGES)
        else "audio"
        if name.endswith(_AUDIO)
        else "video"
        if name.endswith(_VIDEO)
        else ""
    )
    return f" {kind} file " if kind else " file "


def read_shapes(text: str) -> tuple[str, set[str]]:
    """(``text`` with each shaped span replaced by the word it stands for, those words).
    Several file names are "multiple files"; "logo.png" is an "image file", "memo.mp3" an
    "audio file"."""
    found: set[str] = set()
    for needs, pattern, word in _SHAPES:
        if not any(c in text for c in needs):
            continue
        spans = len(pattern.findall(text))
        if not spans:
            continue
        found.add(word)
        if word == "file" and spans > 1:  # "a.txt, b.txt and c.txt"
            text = pattern.sub(" ", pattern.sub(" multiple files ", text, count=1))
        elif word == "file":  # "logo.png": an image file
            text = pattern.sub(lambda m: _file_word(m.group()), text)
        else:
            text = pattern.sub(f" {_VALUE.get(word, word)} ", text)
    return text, found
