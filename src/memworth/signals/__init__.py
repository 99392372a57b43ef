"""Signals past the paper's worth: detectors and estimators the store and governance read.

========================  ===============================================================
:mod:`.change_detection`  has a memory's success rate broken? (CUSUM, explaining away)
:mod:`.confidence_sequences`  anytime-valid intervals for a memory's success probability
:mod:`.context_adjusted`  worth measured against its contexts' base rates
:mod:`.query_clusters`    contexts learned online from query embeddings
:mod:`.coretrieval`       which memories come together; confounds and the alarm splitter
:mod:`.propensity`        inverse-propensity weighted worth
:mod:`.sources`           outcome sources: learned reliability, limits, burst alerts
:mod:`.holdout`           a share of episodes recalled without governance, and its lift
:mod:`.multiplicity`      e-values and e-BH across the memories tested at once
:mod:`.outcome_streams`   a namespace's outcome streams and the alarms standing in it
:mod:`.window_test`       the window test's explaining-away
========================  ===============================================================

Nothing is imported here: each module loads when it is used, so ``import memworth`` stays light.
"""
