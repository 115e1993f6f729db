"""What the tests of several modules and folders share, one small module a kind (imported as
`tests.builders.<module>`: tests/ is a package, so pytest puts the repository root on sys.path).

- `series`: random-init checkpoint series saved on disk
- `stores`: hand-built stores whose pictures are known (`write_series`), no model needed
- `rows`: head_scores and checkpoints rows, built by hand or through the real `aggregate`
- `track`: a track run without Prefect; a store's rows and manifests as a test reads them
- `progress`: what a progress line on a pipe looks like
- `cli`: `dormant` run in-process (captured output, exit code), and many runs in one fresh process
- `shared`: what one pytest run builds once for all its xdist workers (a file lock, a pickled result); a store's
  copy by hard links
- `demo`: `make demo`, run once per pytest run in the background (the docs' numbers, the suggested commands)
- `families`, `oracle`: tiny random models of every family, and the brute-force oracle of the score engine
"""
