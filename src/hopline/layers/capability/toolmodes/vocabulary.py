"""The vocabulary of the search index: the English that requests and tool lists are
written in. Stopwords, the word families a request word may stand for
(:data:`FAMILIES`), which families are verbs that read and which change (for verb
roles), the words that ask a question, and the argument names a value named by its
shape fills. General English and developer vocabulary, never one catalogue's tool
names; ``words.py`` and ``roles.py`` turn it into tables. Data only.
"""

from __future__ import annotations

# English function words, plus what people put around a request ("can you please …")
# and light verbs that say little on their own ("take a screenshot", "give me").
# Words that name an action or object ("all", "get", "list", "new") are kept: they
# tell tools apart.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
        "i",
        "me",
        "my",
        "we",
        "our",
        "us",
        "you",
        "your",
        "please",
        "want",
        "need",
        "would",
        "like",
        "could",
        "can",
        "should",
        "do",
        "does",
        "did",
        "let",
        "some",
        "so",
        "just",
        "which",
        "what",
        "how",
        "its",
        "also",
        "from",
        "about",
        "via",
        "between",
        "within",
        "inside",
        "across",
        "against",
        "among",
        "upon",
        "toward",
        "towards",
        "have",
        "has",
        "had",
        "been",
        "were",
        "am",
        "here",
        "where",
        "when",
        "why",
        "whom",
        "whose",
        "take",
        "give",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "re",
        "ve",
    ]  # what is left of "what's", "don't", "I'd", "we'll"…
)

# Words that stand for one another in requests and in tool lists, one family a line:
# a query word (or phrase) may match any other member of its families, at a discount
# (SYNONYM_WEIGHT), as if the tool had used the query's word. Symmetric by
# construction: "fetch" reaches a tool that says "retrieve" and "retrieve" one that says
# "fetch". A member with spaces is a phrase a request may say ("look up") but no tool
# is searched for; one joined by ``_`` is a compound both may use ("pull_request"). A
# member marked ``~`` has other meanings too: said in a request it reaches its family,
# but a tool using it is not reached by the family ("open a ticket" reaches
# ``create_issue``; "new" does not reach ``open_nodes``), and its literal match counts
# no more than its family's.
FAMILIES: tuple[str, ...] = (
    # what the caller wants done (the CRUD verbs first; the create family must stay first)
    (
        "create|make|new|add|append|prepend|generate|build|set "
        "up|setup|insert|init|initialize|register|spawn|compose|draft|keep track "
        "of|~report|~open|~start|~file|~raise|~log|~drop|~leave|~put|~write|spin up|put "
        "together|~submit|~book|~schedule|~record|~note|~establish|~provision|~craft|~author|~produce|~introduce"
    ),
    (
        "get|retrieve|fetch|read|show|view|see|display|~open|load|print|~return|inspect|examine|~check|pull up|bring "
        "up|dump|look at|grab|obtain|take a look at|have a look at|peek|peek at|glance at|preview"
    ),
    "list|enumerate|~all|~every|browse|index|overview|catalog|inventory",
    "update|edit|modify|change|~set|patch|alter|amend|adjust|replace|rewrite|overwrite|rename|tweak|revise|reassign|reopen|~assign|~close|~mark|~flip|~swap|~fix|correct|refresh|reword|rephrase|retitle|relabel|~sync",
    (
        "delete|remove|drop|erase|destroy|purge|~clear|discard|uninstall|unset|wipe|forget|get rid of|clean "
        "up|cleanup|trash|throw away|nuke|scrap|ditch|tear down|teardown|clear out|wipe out|take down|rip "
        "out|prune|eliminate|expunge|deregister|unregister|dispose of|do away with"
    ),
    (
        "search|find|look for|look up|lookup|locate|~query|seek|grep|discover|hunt|~match|~google|track down|dig "
        "up|~scan|comb through|sift through|~filter"
    ),
    "run|execute|exec|launch|invoke|evaluate|eval|~call|trigger|~start|kick off|perform|fire off|carry out",
    "send|~post|publish|say|tell|notify|announce|share|broadcast|~ping|email|let know",
    "reply|respond|answer|~comment",
    "stop|cancel|kill|halt|terminate|~end|abort|quit|~close|disable|turn off|shut down|shutdown|interrupt|suspend",
    "navigate|~go|visit|browse|~open|load|go to|head to",
    "~back|previous|prior",
    "move|rename|relocate|transfer|shift",
    "copy|duplicate|clone|fork|replicate|mirror",
    "merge|combine|squash",
    "upgrade|update|bump",
    "compress|zip|gzip|archive|pack|tar",
    "wait|until|pause|sleep|await|appear|show up",
    "type|~enter|input|key in|paste",  # not "fill": filling a form is another tool (browser_fill_form)
    "click|press|tap|~hit",
    "hover|mouse over|mouseover|point at",
    "select|choose|~pick",
    "upload|attach",
    "screenshot|screen_shot|screen grab|screen capture|~capture",
    "toggle|enable|disable|~switch|turn on|turn off",
    "scale|resize|viewport|dimensions",
    "explain|documentation|docs",
    "describe|description|details|detail|info|information|metadata",
    "approve|approved|review|reviewed|request changes|requested changes|lgtm",
    "commit|push",
    "save|~store|write|~put|set|persist|~keep|~record|note down|jot down|~cache|stash",
    "memory|remember|memorize|recall|memories|knowledge|remembered|~stored|~know",
    "think|thought|thinking|reason|reasoning|reflect|step by step|problem solving",
    "research|investigate|study|deep dive|analyze|analyse",
    # what it is done to
    "directory|folder|dir|subdirectory|subfolder",
    "repository|repo|project|codebase",
    "issue|ticket|bug",
    "pull_request|pr|merge_request|mr",
    "image|picture|photo|drawing|illustration|artwork|~art|~logo|~icon|graphic",
    "media|image|audio|video",
    "message|msg|~text|chat|~post|dm",
    "comment|remark|feedback|~note",
    "user|person|people|member|account|profile|~everyone|~who|teammate|colleague",
    "self|identity|whoami|who am i|~bot|authenticated|logged in|signed in|~token|integration",
    "profile|timezone|time zone|~title|bio|avatar",
    "channel|room",
    "place|location|business|shop|~store|venue|~spot|restaurant|nearby|~near|~local|~around|close to|close by|near me",
    "coordinates|latitude|longitude|lat|lng|geocode|gps",
    "elevation|altitude|height|~high|sea_level",
    "directions|route|drive|driving|walk|walking|get to",
    "distance|~far|~travel|how long|duration|commute",
    "~key|keyboard|keystroke|~enter|escape|esc|backspace|arrow key|shortcut|hotkey",
    "log|logs|logging|output|stdout|stderr|~printed",
    "entity|~node|~thing",
    (
        "relation|relationship|~link|connection|reports to|works at|works for|works with|belongs to|married "
        "to|friends with|is part of|manages|managed by|owns|owned by|leads|led by|depends on|member of"
    ),
    "observation|fact|~note|~attribute",
    "file|~readme|~makefile|~dockerfile|~changelog|~license",
    "page|doc|document|wiki",
    "block|paragraph|heading|bullet|callout|todo|checkbox|checklist|quote|divider",
    "label|labels|labelled|labeled|tag|tagged",
    "database|db|data_source|datasource|~table|collection",
    "sql|database|db|~table|rows|postgres|postgresql",
    "sql|~count|how many|number of|average|aggregate|tally",
    "cache|redis|key_value",
    "size|~space|~big|~large|bytes|largest|biggest|disk usage",
    "allowed|permitted|accessible|may access|can access|~touch|permission|permissions",
    "environment|env|variables|vars",
    "sum|~add|plus|total|addition",
    "kubernetes|k8s|kube|kubectl|cluster",
    "aws|amazon|bedrock",
    "pod|container",
    "cordon|uncordon|unschedulable|schedulable|~drain|evict|~maintenance",
    "namespace|ns",
    "context|~switch|kubeconfig",
    "helm|~chart",
    "rollout|roll out|rolled out|rolling out|rollback|roll back|revert|undo|redeploy|restart",
    "port|forward|tunnel|expose|localhost",
    "url|website|~site|webpage|~link",
    "browser|chrome|headless|~window",
    "dialog|popup|alert|confirm|modal|prompt",
    "form|~field|fields|textbox|~box",
    "web|internet|online|~google|search engine",
    "news|article|articles|headlines|blog",
    "dark_mode|light_mode|color_scheme|colour_scheme|theme",
    "console|devtools",
    "network|requests|api call|xhr|traffic|response|~headers",
    "javascript|js|script|~code|snippet|~expression",
    "accessibility|a11y|aria|dom",
    "snapshot|element refs|page structure",
    "history|recent|latest|~past",
    "emoji|reaction|~react|thumbs up",
    "thread|conversation|replies",
    "status|checks|ci|~passing|~failing",
    "tree|recursive|nested|hierarchy|~structure",
    "echo|repeat|parrot|send back",
    "~test|demo|~sample|~example|simulate|simulated|~fake|~mock",
)

# Pronouns that say no thing in particular: not a word of the request (nor the name of
# a backend) unless a word for a server follows ("everything you stored", but "the
# everything server").
PRONOUNS = frozenset({"everything", "anything", "something", "nothing"})
SERVERS = frozenset({"server", "servers", "mcp", "backend", "service"})

# The leading families that are actions (verbs), for verb roles.
ACTIONS = next(i for i, f in enumerate(FAMILIES) if f.startswith("directory|"))

# Kubernetes kinds: Kubernetes resources, and a value of a tool's resource argument.
KINDS = frozenset(
    {
        "deployment",
        "statefulset",
        "daemonset",
        "replicaset",
        "configmap",
        "secret",
        "ingress",
        "cronjob",
        "events",
        "pod",
        "node",
        "job",
        "pvc",
        "persistentvolume",
        "persistentvolumeclaim",
        "serviceaccount",
        "hpa",
        "crd",
        "endpoint",
    }
)

# One-way: a query word that implies a phrase of tool words it is not a synonym of.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "which": ("list",),
    "draw": ("generate image",),
    "paint": ("generate image",),
    "sketch": ("generate image",),
    "mkdir": ("create directory",),
    "ls": ("list",),
    "rm": ("delete",),
    "mv": ("move",),
    "cp": ("copy",),
    "remember": ("memory",),
    "recall": ("memory search",),
    # a table's rows and columns are the pages and properties of a database of pages (Notion)
    "row": ("page",),
    "column": ("property",),
    # Kubernetes kinds are Kubernetes resources
    **{kind: ("kubernetes resource",) for kind in KINDS},
}

# Verb roles (``roles.py``): the action families, by their first member, whose verbs
# read and whose verbs change something. The others (navigate, click, type…) say neither.
READS = frozenset({"get", "list", "search", "explain", "describe"})
WRITES = frozenset(
    {
        "create",
        "update",
        "delete",
        "run",
        "send",
        "reply",
        "stop",
        "move",
        "copy",
        "merge",
        "upgrade",
        "compress",
        "save",
        "commit",
        "upload",
        "approve",
    }
)
# A request that opens with one of these asks to read ("what's in …", "is there …").
QUESTIONS = frozenset(
    {
        "what",
        "whats",
        "which",
        "who",
        "whose",
        "where",
        "when",
        "why",
        "how",
        "is",
        "are",
        "was",
        "were",
        "has",
        "have",
        "any",
        "anyone",
        "anything",
    }
)
# After an ambiguous create word ("~open", "~start"), these make it mean create ("open a
# ticket", "start a new thread"); anything else, one of its other senses ("open the file").
ARTICLES = frozenset({"a", "an", "new", "another"})
# Before a word that is also a verb, these make it a noun or an adjective ("the cache
# key", "the open PRs", "my log file", "still open"): its verb senses are dropped.
DETERMINERS = frozenset(
    {
        "the",
        "this",
        "that",
        "these",
        "those",
        "my",
        "our",
        "your",
        "its",
        "their",
        "his",
        "her",
        "each",
        "every",
        "any",
        "no",
        "some",
        "a",
        "an",
        "is",
        "are",
        "was",
        "were",
        "be",
        "still",
        "stay",
        "stays",
        "remain",
        "remains",
    }
)  # "are open late", "still open": a state

# The argument names a value named by its shape fills ("notes.md" fills a ``path``).
FILLS = {
    "coordinates": "coordinates latitude longitude location",
    "file": "file path filename",
    "path": "path directory",
    "url": "url link",
    "channel": "channel",
    "user": "user",
    "slug": "owner repo project",
    "dimensions": "width height",
    "key": "key",
    "kind": "resource kind",
}
