"""One module per file layout, each the layout's one reader and one writer: whoever reads
or writes that layout (``sets add``, ``audit run --shards``, ``filter run --shards``, ``sets
export``, image shards) goes through it.

- :mod:`.tar`: webdataset tars (members grouped into samples; written PAX or USTAR).
"""
