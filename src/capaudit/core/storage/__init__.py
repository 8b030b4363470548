"""The storage layer: every file capaudit reads or writes, on a disk or in object storage
(``s3://``, ``gs://``, ``hf://``, ``http(s)://`` to read, ``memory://``), goes through here,
and nothing outside this package imports fsspec or calls ``is_remote``: code above calls the
layer, and asks :func:`.urls.on_disk` only where a reader needs a local file by its path or
an output is written in place.

- :mod:`.urls`: locations as text (is it a URL, brace lists, joins, names, shown without
  credentials); imports no file system.
- :mod:`.fs`: a URL -> (file system, path) over fsspec, streamed reads retried until a
  deadline, an object's identity (ETag, size, modification time).
- :mod:`.listing`: a folder, a glob, a brace list or a manifest listed with narrow prefixes.
- :mod:`.remote_write`: an upload that appears whole or not at all, a conditional create.
- :mod:`.folder`: :class:`~.folder.Folder`, a work or output folder by location, written by
  name; :func:`~.folder.staged` builds a folder output locally and uploads it.
- :mod:`.paths`: files by location string (open, list, stat, write whole, remove), the one
  place that branches on a disk versus object storage.
- :mod:`.work_folder`: where a work folder goes, one run at a time in it (``flock``, or a
  lock object), what a successful run made removed.
- :mod:`.local_copy`: a private local copy for the readers that need a path;
  :mod:`.remote_parquet`: a remote parquet file's columns read window by window.

Anchor: datatrove's ``DataFolder`` (a folder over fsspec that lists sorted, makes parents
on write, and on object storage writes without a rename).
"""
