#!/usr/bin/env python3
"""Turns Debian's translated manual pages (troff, gzip) into plain-text files for the
reference sample of scripts/lang-means: `manpages-to-text.py SRC_DIR OUT_DIR`.

Keeps the running text: drops comment lines (.\\"), turns section/paragraph macros into
blank lines (the section title stays as a line), keeps the words of other macros, removes
font and spacing escapes (\\fB, \\fP, \\, \\/ \\& …) and turns \\- into '-'. Standard library only.
Output: one OUT_DIR/<section>/<page>.txt per page (pages whose text is under 200 chars skipped).
"""
import gzip
import os
import re
import sys

ESC = re.compile(r"\\f(\[[^\]]*\]|\(..|.)|\\[,/&:%~|^0]|\\s[-+]?\d|\\\*\(..|\\\*.|\\\(..|\\e")


def text_of(src: str) -> str:
    out = []
    for line in src.splitlines():
        if line.startswith(('.\\"', "'\\\"")):
            continue
        if line.startswith((".", "'")):
            parts = line[1:].split(None, 1)
            macro = parts[0] if parts else ""
            rest = parts[1] if len(parts) > 1 else ""
            if macro in ("PP", "LP", "P", "TP", "IP", "br", "sp", "RS", "RE", "nf", "fi", "in", "ad", "na", "ne", "hy", "nh"):
                out.append("")
                if macro == "IP" and rest:
                    out.append(rest.strip('"'))
                continue
            if macro in ("TH", "so", "de", "ds", "nr", "ft", "ps", "ll", "ti", "ta"):
                continue
            line = rest.replace('"', "")
        line = ESC.sub("", line).replace("\\-", "-").replace("\\ ", " ").replace("\\\\", "\\")
        out.append(line)
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    n = 0
    for root, _, files in sorted(os.walk(src)):
        for f in sorted(files):
            if not f.endswith(".gz"):
                continue
            p = os.path.join(root, f)
            try:
                raw = gzip.decompress(open(p, "rb").read()).decode("utf-8")
            except (OSError, UnicodeDecodeError) as e:
                print(f"skip {p}: {e}", file=sys.stderr)
                continue
            if raw.startswith(".so "):
                continue
            t = text_of(raw)
            if len(t) < 200:
                continue
            sub = os.path.join(dst, os.path.basename(root))
            os.makedirs(sub, exist_ok=True)
            with open(os.path.join(sub, f[:-3] + ".txt"), "w", encoding="utf-8") as o:
                o.write(t)
            n += 1
    print(f"{n} pages -> {dst}", file=sys.stderr)


if __name__ == "__main__":
    main()
