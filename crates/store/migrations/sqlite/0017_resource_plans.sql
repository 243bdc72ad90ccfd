-- The plans a resource's body names: each component's (`components[].plan`) when it has a
-- list of components, else its `plan`; distinct, in byte order, separated by a space; '' when
-- it names none. With the index, the resources on a set of plans are counted and found
-- without reading the others (a preview page reads one page, issue 42, item 8). Written with
-- every body from now on (`ops::resources::plans_named`).
ALTER TABLE resources ADD COLUMN plans TEXT NOT NULL DEFAULT '';
UPDATE resources SET plans = CASE
    WHEN json_type(body_json, '$.components') = 'array' THEN COALESCE(
        (SELECT group_concat(plan, ' ' ORDER BY plan) FROM (
            SELECT DISTINCT json_extract(value, '$.plan') AS plan
            FROM json_each(resources.body_json, '$.components')
            WHERE json_type(value, '$.plan') = 'text')),
        '')
    WHEN json_type(body_json, '$.plan') = 'text' THEN json_extract(body_json, '$.plan')
    ELSE ''
END;
CREATE INDEX resources_by_plans ON resources (boundary, resource_type, plans, name);
