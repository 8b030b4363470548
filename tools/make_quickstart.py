"""Write docs/quickstart.ipynb (the cells below, no outputs); tests execute it.

Run ``python tools/make_quickstart.py`` after editing a cell here.
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

CELLS = [
    ("md", "# capaudit quickstart\n\nAudit caption sets from Python, offline, on the bundled "
           "1,000-image COCO sample: human captions (`coco`) and two captioning models "
           "(`oscar`, `nic`). Every call is the same function the `capaudit` CLI runs."),
    ("code", "import tempfile, pathlib\nimport capaudit\n\n"
             "work = pathlib.Path(tempfile.mkdtemp())\n"
             "store = capaudit.open(work / 'audit.duckdb')\nprint(capaudit.__version__, store)"),
    ("md", "## Add caption sets and the annotations the metrics need"),
    ("code", "for name, file in [('coco', 'coco_captions.json'), ('oscar', 'oscar.jsonl'),\n"
             "                   ('nic', 'nic.jsonl')]:\n"
             "    store.add_set(name, capaudit.demo_file(file))\n"
             "store.add_annotations('instances', capaudit.demo_file('instance_categories.jsonl'))\n"
             "store.add_annotations('chair-gt', capaudit.demo_file('chair_gt.jsonl'))\n"
             "store.add_annotations('demographics', capaudit.demo_file('demographics.jsonl'))\n"
             "[(s.name, s.n_captions, s.n_images) for s in store.sets()]"),
    ("md", "## Audit: one row per set x metric, with n and a 95% bootstrap interval"),
    ("code", "res = store.audit(['coco', 'oscar', 'nic'], n_boot=200)\n"
             "df = res.to_pandas()\ndf.pivot(index='metric', columns='set', values='value')"),
    ("md", "## Compare, with the plots inline"),
    ("code", "from IPython.display import Image, display\n\n"
             "cmp = store.compare(['coco', 'oscar', 'nic'], n_boot=200, report=work / 'report')\n"
             "print('best:', cmp.best)\n"
             "for png in sorted((work / 'report').glob('*.png')):\n"
             "    display(Image(filename=str(png)))"),
    ("md", "## Disparity: each metric on images of men and of women, and the gap"),
    ("code", "gap = store.disparity('nic', by='gender', metrics=['chair_s', 'recall', 'length'],\n"
             "                      n_boot=200).to_pandas()\ngap[gap.group.str.contains(':')]"),
    ("md", "## Filter hallucinated sentences, then compare before and after\n\n"
           "`compare` scores the filtered set on its parent's images (a dropped caption counts "
           "as empty), so what the filter cost is visible; `n_images` and `status` say what "
           "each value rests on (a CHAIR scored with the ground truth the filter used is "
           "`circular`, not a result: its independent score, under the instance categories, "
           "is in its notes)."),
    ("code", "from capaudit.api import comparison_table\n\n"
             "info, summary = store.filter('nic', 'hallucination', 'nic_clean', "
             "action='drop-sentence')\n"
             "cmp = store.compare(['nic', 'nic_clean'], metrics=['chair_s', 'chair_i', 'recall'],\n"
             "                    n_boot=200, report=work / 'report_filter')\n"
             "for row in cmp.parent_costs:\n"
             "    print(row)\n"
             "after = comparison_table(cmp).to_pandas()\n"
             "after[after.metric != 'lic'].pivot(index='metric', columns='set',\n"
             "                                   values=['value', 'n_images', 'status'])"),
    ("md", "## Query the store (read-only SQL)"),
    ("code", "store.query(\"SELECT image_id, original, reason FROM filter_log WHERE set_name = 'nic_clean' \"\n"
             "            \"AND action = 'drop' LIMIT 5\").to_pandas()"),
]


def build() -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.cells = [new_markdown_cell(src) if kind == "md" else new_code_cell(src)
                for kind, src in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb


if __name__ == "__main__":
    out = Path(__file__).resolve().parents[1] / "docs" / "quickstart.ipynb"
    nbformat.write(build(), out)
    print(f"wrote {out}")
