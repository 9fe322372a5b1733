-- The five TPC-C transactions (TPC-C 2.4-2.8) as server-side functions, one call per
-- transaction from pgbench (femu/apps/tpcc/*.pgb). Each locks rows in one order (district
-- before stock, stock by item id, new orders with SKIP LOCKED) so that concurrent clients
-- never deadlock: pgbench ends a client on any error.

-- New-Order: an order of ol_cnt lines; rbk = 1 (1% of them) names an unused item on the
-- last line, and the whole order is rolled back (TPC-C 2.4.1.4). 1% of the lines come from
-- another warehouse when there is one. Returns the order's total, or NULL when rolled back.
CREATE FUNCTION tpcc_new_order(w int, d int, c int, ol_cnt int, rbk int, warehouses int)
RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE
    tax_w numeric; tax_d numeric; discount numeric; o int; total numeric := 0;
    items int[]; supply int[]; all_local int := 1; line record; price numeric; qty int; dist text;
BEGIN
    SELECT array_agg(i ORDER BY i), array_agg(s ORDER BY i) INTO items, supply
    FROM (SELECT CASE WHEN rbk = 1 AND n = ol_cnt THEN 100001 ELSE tpcc_nurand(8191, 1, 100000, 7911) END AS i,
                 CASE WHEN warehouses > 1 AND random() < 0.01
                      THEN 1 + (w + floor(random() * (warehouses - 1))::int) % warehouses ELSE w END AS s
          FROM generate_series(1, ol_cnt) AS n) AS lines;
    IF w <> ALL (supply) THEN all_local := 0; END IF;
    BEGIN
        SELECT w_tax INTO tax_w FROM warehouse WHERE w_id = w;
        UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = w AND d_id = d
            RETURNING d_tax, d_next_o_id - 1 INTO tax_d, o;
        SELECT c_discount INTO discount FROM customer WHERE c_w_id = w AND c_d_id = d AND c_id = c;
        INSERT INTO orders VALUES (w, d, o, c, now(), NULL, ol_cnt, all_local);
        INSERT INTO new_order VALUES (w, d, o);
        FOR n IN 1..ol_cnt LOOP
            SELECT i_price INTO price FROM item WHERE i_id = items[n];
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = 'item not found';
            END IF;
            qty := 1 + floor(random() * 10)::int;
            UPDATE stock SET s_quantity = CASE WHEN s_quantity >= qty + 10 THEN s_quantity - qty
                                               ELSE s_quantity - qty + 91 END,
                             s_ytd = s_ytd + qty, s_order_cnt = s_order_cnt + 1,
                             s_remote_cnt = s_remote_cnt + (supply[n] <> w)::int
                WHERE s_w_id = supply[n] AND s_i_id = items[n]
                RETURNING CASE d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03
                                 WHEN 4 THEN s_dist_04 WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06
                                 WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08 WHEN 9 THEN s_dist_09
                                 ELSE s_dist_10 END INTO dist;
            INSERT INTO order_line VALUES (w, d, o, n, items[n], supply[n], NULL, qty, qty * price, dist);
            total := total + qty * price;
        END LOOP;
    EXCEPTION WHEN no_data_found THEN
        RETURN NULL;  -- the unused item: everything above is undone
    END;
    RETURN total * (1 - discount) * (1 + tax_w + tax_d);
END $$;

-- The customer of a Payment or Order-Status: by number, or (by_name) the middle one of
-- those with the last name of number n, by first name (TPC-C 2.5.2.2).
CREATE FUNCTION tpcc_customer(w int, d int, c int, by_name boolean, n int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE ids int[];
BEGIN
    IF NOT by_name THEN RETURN c; END IF;
    SELECT array_agg(c_id ORDER BY c_first) INTO ids FROM customer
        WHERE c_w_id = w AND c_d_id = d AND c_last = tpcc_last_name(n);
    IF ids IS NULL THEN RETURN c; END IF;  -- no one of that name: the numbered customer
    RETURN ids[(array_length(ids, 1) + 1) / 2];
END $$;

-- Payment: a customer (15% of another warehouse when there is one) pays an amount to
-- warehouse w, district d.
CREATE FUNCTION tpcc_payment(w int, d int, c int, by_name boolean, n int, amount numeric,
                             remote boolean, warehouses int)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE cw int := w; cd int := d; cid int; w_name text; d_name text; credit text;
BEGIN
    IF remote AND warehouses > 1 THEN
        cw := 1 + (w + floor(random() * (warehouses - 1))::int) % warehouses;
        cd := 1 + floor(random() * 10)::int;
    END IF;
    UPDATE warehouse SET w_ytd = w_ytd + amount WHERE w_id = w RETURNING warehouse.w_name INTO w_name;
    UPDATE district SET d_ytd = d_ytd + amount WHERE d_w_id = w AND d_id = d RETURNING district.d_name INTO d_name;
    cid := tpcc_customer(cw, cd, c, by_name, n);
    UPDATE customer SET c_balance = c_balance - amount, c_ytd_payment = c_ytd_payment + amount,
                        c_payment_cnt = c_payment_cnt + 1
        WHERE c_w_id = cw AND c_d_id = cd AND c_id = cid RETURNING c_credit INTO credit;
    IF credit = 'BC' THEN
        UPDATE customer SET c_data = left(cid || ' ' || cd || ' ' || cw || ' ' || d || ' ' || w || ' '
                                          || amount || ' ' || c_data, 500)
            WHERE c_w_id = cw AND c_d_id = cd AND c_id = cid;
    END IF;
    INSERT INTO history VALUES (cid, cd, cw, d, w, now(), amount, left(w_name || '    ' || d_name, 24));
END $$;

-- Order-Status: a customer's balance and last order with its lines (read only).
CREATE FUNCTION tpcc_order_status(w int, d int, c int, by_name boolean, n int)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE cid int; o int; lines bigint;
BEGIN
    cid := tpcc_customer(w, d, c, by_name, n);
    PERFORM c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id = w AND c_d_id = d AND c_id = cid;
    SELECT o_id INTO o FROM orders WHERE o_w_id = w AND o_d_id = d AND o_c_id = cid ORDER BY o_id DESC LIMIT 1;
    SELECT count(*) INTO lines FROM (SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d
        FROM order_line WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o) AS l;
    RETURN lines;
END $$;

-- Delivery: the oldest undelivered order of each of the warehouse's 10 districts is
-- delivered by a carrier, its amount charged to its customer. Returns how many were.
CREATE FUNCTION tpcc_delivery(w int, carrier int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE o int; cid int; amount numeric; delivered int := 0;
BEGIN
    FOR d IN 1..10 LOOP
        SELECT no_o_id INTO o FROM new_order WHERE no_w_id = w AND no_d_id = d
            ORDER BY no_o_id LIMIT 1 FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN o IS NULL;
        DELETE FROM new_order WHERE no_w_id = w AND no_d_id = d AND no_o_id = o;
        UPDATE orders SET o_carrier_id = carrier WHERE o_w_id = w AND o_d_id = d AND o_id = o
            RETURNING o_c_id INTO cid;
        UPDATE order_line SET ol_delivery_d = now() WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o;
        SELECT sum(ol_amount) INTO amount FROM order_line WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o;
        UPDATE customer SET c_balance = c_balance + amount, c_delivery_cnt = c_delivery_cnt + 1
            WHERE c_w_id = w AND c_d_id = d AND c_id = cid;
        delivered := delivered + 1;
    END LOOP;
    RETURN delivered;
END $$;

-- Stock-Level: how many distinct items of the district's last 20 orders are below a
-- threshold in stock (read only).
CREATE FUNCTION tpcc_stock_level(w int, d int, threshold int) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(DISTINCT s_i_id) FROM order_line, stock, district
    WHERE d_w_id = w AND d_id = d AND ol_w_id = w AND ol_d_id = d
      AND ol_o_id >= d_next_o_id - 20 AND ol_o_id < d_next_o_id
      AND s_w_id = w AND s_i_id = ol_i_id AND s_quantity < threshold
$$;
