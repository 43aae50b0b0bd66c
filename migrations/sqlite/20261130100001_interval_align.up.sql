-- Interval tasks made before spreading existed keep their fire times: they
-- are marked epoch-aligned ("align":"epoch"), at the multiples of their
-- interval, as they always fired; new interval tasks default to "spread" (a
-- stable per-task offset). The definition is JSON written by Go's
-- encoding/json, so the schedule object always begins with its kind; a plain
-- text replacement works alike on every dialect (a JSON function would
-- reformat the text on MySQL, which LIKE searches of the spec rely on).
UPDATE tasks
SET spec = REPLACE(spec, '"schedule":{"kind":"interval"', '"schedule":{"kind":"interval","align":"epoch"')
WHERE spec LIKE '%"schedule":{"kind":"interval"%'
  AND spec NOT LIKE '%"schedule":{"kind":"interval","align":%';
