"""One module per file layout, each the layout's one reader and one writer: whoever reads
or writes that layout (``sets add``, ``audit run --shards``, ``filter run --shards``, ``sets
export``, image shards) goes through it.

- :mod:`.tar`: webdataset tars (members grouped into samples; written PAX or USTAR);
- :mod:`.parquet`: parquet (record batches of chosen columns, by path, stream or URL ranges;
  written with a source's schema and compression);
- :mod:`.arrow`: Arrow IPC (a ``datasets`` folder's shards; read only);
- :mod:`.json`: JSON documents, JSONL lines, JSON arrays record by record (exact text kept),
  and a record written back in its own style;
- :mod:`.csv`: CSV/TSV records with their raw text (delimiter, header), a revised record
  written in its own quoting;
- :mod:`.flickr_tokens`: Flickr's ``IMAGE#N<TAB>caption`` lines.

Where a file is (a local path or a URL) is the storage layer's
(:func:`capaudit.core.storage.paths.readable`); what its bytes mean is the layout's.
"""
