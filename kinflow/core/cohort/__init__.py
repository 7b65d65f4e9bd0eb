"""Cohorts, purely: the rows a parent keeps about its children and every rule about them.

* ``registry``: how a stored row reads (``$subworkflows``, the API's ``Row``, counts);
* ``chunks``: where rows are stored (chunk documents beside the parent);
* ``tallies``: the per-cohort counts and chunk locations kept on the parent;
* ``observe``: what was observed about children landing on their rows;
* ``outcomes``: how a child finished and what outputs its row carries;
* ``window`` and ``budget``: how many children run at once, how many may fail;
* ``selection``: picking rows by filter, derived keys and bulk results;
* ``bulk``: ``fireCohort``, ``abortCohort`` and ``cancelCohort``;
* ``redrive``: ``redriveCohort``, a new attempt for finished rows.
"""
