-- The plans a resource's body names: each component's (`components[].plan`) when it has a
-- list of components, else its `plan`; distinct, in byte order, separated by a space; '' when
-- it names none. With the index, the resources on a set of plans are counted and found
-- without reading the others (a preview page reads one page, issue 42, item 8). Written with
-- every body from now on (`ops::resources::plans_named`).
ALTER TABLE resources ADD COLUMN plans TEXT COLLATE "C" NOT NULL DEFAULT '';
UPDATE resources SET plans = CASE
    WHEN jsonb_typeof(body_json::jsonb -> 'components') = 'array' THEN COALESCE(
        (SELECT string_agg(DISTINCT (c ->> 'plan') COLLATE "C", ' '
                           ORDER BY (c ->> 'plan') COLLATE "C")
         FROM jsonb_array_elements(body_json::jsonb -> 'components') AS c
         WHERE jsonb_typeof(c -> 'plan') = 'string'),
        '')
    WHEN jsonb_typeof(body_json::jsonb -> 'plan') = 'string' THEN body_json::jsonb ->> 'plan'
    ELSE ''
END;
CREATE INDEX resources_by_plans ON resources (boundary, resource_type, plans, name);
