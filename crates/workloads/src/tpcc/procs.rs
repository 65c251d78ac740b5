//! Server-side transactions, one call per transaction: PL/pgSQL functions
//! on PostgreSQL (run in the call's own implicit transaction), stored
//! procedures on MySQL/MariaDB (each its own START TRANSACTION … COMMIT,
//! rolling back and re-raising on any error).

use storbench_db::Dialect;

/// Routine names, for DROP.
pub const NAMES: [&str; 5] = ["sb_neword", "sb_payment", "sb_ostat", "sb_delivery", "sb_slev"];

/// Error codes the New-Order routine raises for its designed rollback:
/// PostgreSQL's SQLSTATE P0001, MySQL's 1644 (a SIGNAL of SQLSTATE 45000).
pub const ROLLBACK_CODES: [&str; 2] = ["P0001", "1644"];

/// CREATE statements for `d`; empty when the engine gets none.
pub fn create(d: Dialect) -> Vec<&'static str> {
    match d {
        Dialect::Postgres => PG.to_vec(),
        Dialect::Mysql => MY.to_vec(),
        Dialect::Sqlite => Vec::new(),
    }
}

const PG: [&str; 5] = [
    r#"CREATE OR REPLACE FUNCTION sb_neword(p_w int, p_d int, p_c int, p_cnt int, p_all_local int,
    p_items text, p_supply text, p_qty text) RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE
  a_item int[] := string_to_array(p_items, ',')::int[];
  a_supply int[] := string_to_array(p_supply, ',')::int[];
  a_qty int[] := string_to_array(p_qty, ',')::int[];
  v_disc numeric; v_last text; v_credit text; v_wtax numeric; v_dtax numeric; v_o int;
  v_price numeric; v_name text; v_idata text; v_sdist text; v_sdata text;
  v_total numeric := 0; v_amt numeric;
BEGIN
  SELECT c_discount, c_last, c_credit INTO v_disc, v_last, v_credit
    FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = p_c;
  SELECT w_tax INTO v_wtax FROM warehouse WHERE w_id = p_w;
  UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = p_w AND d_id = p_d
    RETURNING d_next_o_id - 1, d_tax INTO v_o, v_dtax;
  INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local)
    VALUES (v_o, p_d, p_w, p_c, localtimestamp, NULL, p_cnt, p_all_local);
  INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (v_o, p_d, p_w);
  FOR i IN 1..p_cnt LOOP
    SELECT i_price, i_name, i_data INTO v_price, v_name, v_idata FROM item WHERE i_id = a_item[i];
    IF NOT FOUND THEN
      RAISE EXCEPTION 'tpcc new-order rollback: item % not found', a_item[i] USING ERRCODE = 'P0001';
    END IF;
    UPDATE stock SET
      s_quantity = CASE WHEN s_quantity - a_qty[i] >= 10 THEN s_quantity - a_qty[i] ELSE s_quantity - a_qty[i] + 91 END,
      s_ytd = s_ytd + a_qty[i], s_order_cnt = s_order_cnt + 1,
      s_remote_cnt = s_remote_cnt + CASE WHEN a_supply[i] <> p_w THEN 1 ELSE 0 END
      WHERE s_i_id = a_item[i] AND s_w_id = a_supply[i]
      RETURNING CASE p_d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03 WHEN 4 THEN s_dist_04
        WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08
        WHEN 9 THEN s_dist_09 ELSE s_dist_10 END, s_data INTO v_sdist, v_sdata;
    v_amt := a_qty[i] * v_price;
    v_total := v_total + v_amt;
    INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d,
      ol_quantity, ol_amount, ol_dist_info)
      VALUES (v_o, p_d, p_w, i, a_item[i], a_supply[i], NULL, a_qty[i], v_amt, v_sdist);
  END LOOP;
  RETURN v_total * (1 - v_disc) * (1 + v_wtax + v_dtax);
END $$"#,
    r#"CREATE OR REPLACE FUNCTION sb_payment(p_w int, p_d int, p_c_w int, p_c_d int, p_c int, p_by_name int,
    p_last text, p_amount numeric) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_wname text; v_dname text; v_c int; v_n int;
BEGIN
  UPDATE warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w RETURNING w_name INTO v_wname;
  UPDATE district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w AND d_id = p_d RETURNING d_name INTO v_dname;
  IF p_by_name = 1 THEN
    SELECT count(*) INTO v_n FROM customer WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_last = p_last;
    SELECT c_id INTO v_c FROM customer WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_last = p_last
      ORDER BY c_first OFFSET greatest((v_n - 1) / 2, 0) LIMIT 1;
  ELSE
    v_c := p_c;
  END IF;
  UPDATE customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
    c_payment_cnt = c_payment_cnt + 1,
    c_data = CASE WHEN c_credit = 'BC' THEN substr(v_c || ' ' || p_c_d || ' ' || p_c_w || ' ' || p_d || ' '
      || p_w || ' ' || p_amount || ' | ' || c_data, 1, 500) ELSE c_data END
    WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c;
  INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
    VALUES (v_c, p_c_d, p_c_w, p_d, p_w, localtimestamp, p_amount, v_wname || '    ' || v_dname);
  RETURN v_c;
END $$"#,
    r#"CREATE OR REPLACE FUNCTION sb_ostat(p_w int, p_d int, p_c int, p_by_name int, p_last text)
    RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_c int; v_n int; v_bal numeric; v_first text; v_middle text; v_lastn text; v_o int; v_carrier int; v_sum numeric;
BEGIN
  IF p_by_name = 1 THEN
    SELECT count(*) INTO v_n FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last;
    SELECT c_id INTO v_c FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last
      ORDER BY c_first OFFSET greatest((v_n - 1) / 2, 0) LIMIT 1;
  ELSE
    v_c := p_c;
  END IF;
  SELECT c_balance, c_first, c_middle, c_last INTO v_bal, v_first, v_middle, v_lastn
    FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = v_c;
  SELECT o_id, o_carrier_id INTO v_o, v_carrier FROM orders
    WHERE o_w_id = p_w AND o_d_id = p_d AND o_c_id = v_c ORDER BY o_id DESC LIMIT 1;
  SELECT count(*), sum(ol_amount) INTO v_n, v_sum FROM order_line
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id = v_o;
  RETURN v_n;
END $$"#,
    r#"CREATE OR REPLACE FUNCTION sb_delivery(p_w int, p_carrier int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_o int; v_c int; v_sum numeric; v_n int := 0;
BEGIN
  FOR d IN 1..10 LOOP
    v_o := NULL;
    DELETE FROM new_order WHERE no_w_id = p_w AND no_d_id = d AND no_o_id =
      (SELECT min(no_o_id) FROM new_order WHERE no_w_id = p_w AND no_d_id = d)
      RETURNING no_o_id INTO v_o;
    CONTINUE WHEN v_o IS NULL;
    UPDATE orders SET o_carrier_id = p_carrier WHERE o_w_id = p_w AND o_d_id = d AND o_id = v_o
      RETURNING o_c_id INTO v_c;
    UPDATE order_line SET ol_delivery_d = localtimestamp WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
    SELECT sum(ol_amount) INTO v_sum FROM order_line WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
    UPDATE customer SET c_balance = c_balance + coalesce(v_sum, 0), c_delivery_cnt = c_delivery_cnt + 1
      WHERE c_w_id = p_w AND c_d_id = d AND c_id = v_c;
    v_n := v_n + 1;
  END LOOP;
  RETURN v_n;
END $$"#,
    r#"CREATE OR REPLACE FUNCTION sb_slev(p_w int, p_d int, p_threshold int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_next int; v_n int;
BEGIN
  SELECT d_next_o_id INTO v_next FROM district WHERE d_w_id = p_w AND d_id = p_d;
  SELECT count(DISTINCT s_i_id) INTO v_n FROM order_line, stock
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id < v_next AND ol_o_id >= v_next - 20
      AND s_w_id = p_w AND s_i_id = ol_i_id AND s_quantity < p_threshold;
  RETURN v_n;
END $$"#,
];

const MY: [&str; 5] = [
    r#"CREATE PROCEDURE sb_neword(p_w INT, p_d INT, p_c INT, p_cnt INT, p_all_local INT,
    p_items TEXT, p_supply TEXT, p_qty TEXT)
BEGIN
  DECLARE v_disc, v_wtax, v_dtax DECIMAL(4,4);
  DECLARE v_price DECIMAL(5,2);
  DECLARE v_amt, v_total DECIMAL(12,2) DEFAULT 0;
  DECLARE v_o, v_i, v_item, v_sw, v_q INT;
  DECLARE v_sdist CHAR(24);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  SELECT c_discount INTO v_disc FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = p_c;
  SELECT w_tax INTO v_wtax FROM warehouse WHERE w_id = p_w;
  SELECT d_next_o_id, d_tax INTO v_o, v_dtax FROM district WHERE d_w_id = p_w AND d_id = p_d FOR UPDATE;
  UPDATE district SET d_next_o_id = v_o + 1 WHERE d_w_id = p_w AND d_id = p_d;
  INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local)
    VALUES (v_o, p_d, p_w, p_c, NOW(), NULL, p_cnt, p_all_local);
  INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (v_o, p_d, p_w);
  SET v_i = 1;
  WHILE v_i <= p_cnt DO
    SET v_item = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(p_items, ',', v_i), ',', -1) AS SIGNED);
    SET v_sw = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(p_supply, ',', v_i), ',', -1) AS SIGNED);
    SET v_q = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(p_qty, ',', v_i), ',', -1) AS SIGNED);
    SET v_price = NULL;
    SELECT i_price INTO v_price FROM item WHERE i_id = v_item;
    IF v_price IS NULL THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'tpcc new-order rollback: item not found';
    END IF;
    SELECT CASE p_d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03 WHEN 4 THEN s_dist_04
        WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08
        WHEN 9 THEN s_dist_09 ELSE s_dist_10 END
      INTO v_sdist FROM stock WHERE s_i_id = v_item AND s_w_id = v_sw FOR UPDATE;
    UPDATE stock SET s_quantity = IF(s_quantity - v_q >= 10, s_quantity - v_q, s_quantity - v_q + 91),
      s_ytd = s_ytd + v_q, s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + IF(v_sw <> p_w, 1, 0)
      WHERE s_i_id = v_item AND s_w_id = v_sw;
    SET v_amt = v_q * v_price;
    SET v_total = v_total + v_amt;
    INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d,
      ol_quantity, ol_amount, ol_dist_info)
      VALUES (v_o, p_d, p_w, v_i, v_item, v_sw, NULL, v_q, v_amt, v_sdist);
    SET v_i = v_i + 1;
  END WHILE;
  COMMIT;
END"#,
    r#"CREATE PROCEDURE sb_payment(p_w INT, p_d INT, p_c_w INT, p_c_d INT, p_c INT, p_by_name INT,
    p_last VARCHAR(16), p_amount DECIMAL(6,2))
BEGIN
  DECLARE v_wname, v_dname VARCHAR(10);
  DECLARE v_c, v_n, v_off INT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  UPDATE warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w;
  SELECT w_name INTO v_wname FROM warehouse WHERE w_id = p_w;
  UPDATE district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w AND d_id = p_d;
  SELECT d_name INTO v_dname FROM district WHERE d_w_id = p_w AND d_id = p_d;
  IF p_by_name = 1 THEN
    SELECT COUNT(*) INTO v_n FROM customer WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_last = p_last;
    SET v_off = GREATEST((v_n - 1) DIV 2, 0);
    SELECT c_id INTO v_c FROM customer WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_last = p_last
      ORDER BY c_first LIMIT v_off, 1;
  ELSE
    SET v_c = p_c;
  END IF;
  UPDATE customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
    c_payment_cnt = c_payment_cnt + 1,
    c_data = IF(c_credit = 'BC', SUBSTRING(CONCAT_WS(' ', v_c, p_c_d, p_c_w, p_d, p_w, p_amount, '|', c_data), 1, 500), c_data)
    WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c;
  INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
    VALUES (v_c, p_c_d, p_c_w, p_d, p_w, NOW(), p_amount, CONCAT(v_wname, '    ', v_dname));
  COMMIT;
END"#,
    r#"CREATE PROCEDURE sb_ostat(p_w INT, p_d INT, p_c INT, p_by_name INT, p_last VARCHAR(16))
BEGIN
  DECLARE v_c, v_n, v_off, v_o, v_carrier INT;
  DECLARE v_bal, v_sum DECIMAL(12,2);
  DECLARE v_first VARCHAR(16);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  IF p_by_name = 1 THEN
    SELECT COUNT(*) INTO v_n FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last;
    SET v_off = GREATEST((v_n - 1) DIV 2, 0);
    SELECT c_id INTO v_c FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_last = p_last
      ORDER BY c_first LIMIT v_off, 1;
  ELSE
    SET v_c = p_c;
  END IF;
  SELECT c_balance, c_first INTO v_bal, v_first FROM customer WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = v_c;
  SELECT o_id, o_carrier_id INTO v_o, v_carrier FROM orders
    WHERE o_w_id = p_w AND o_d_id = p_d AND o_c_id = v_c ORDER BY o_id DESC LIMIT 1;
  SELECT COUNT(*), SUM(ol_amount) INTO v_n, v_sum FROM order_line
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id = v_o;
  COMMIT;
END"#,
    r#"CREATE PROCEDURE sb_delivery(p_w INT, p_carrier INT)
BEGIN
  DECLARE v_d, v_o, v_c INT;
  DECLARE v_sum DECIMAL(12,2);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  SET v_d = 1;
  WHILE v_d <= 10 DO
    SET v_o = NULL;
    SELECT no_o_id INTO v_o FROM new_order WHERE no_w_id = p_w AND no_d_id = v_d
      ORDER BY no_o_id LIMIT 1 FOR UPDATE;
    IF v_o IS NOT NULL THEN
      DELETE FROM new_order WHERE no_w_id = p_w AND no_d_id = v_d AND no_o_id = v_o;
      SELECT o_c_id INTO v_c FROM orders WHERE o_w_id = p_w AND o_d_id = v_d AND o_id = v_o;
      UPDATE orders SET o_carrier_id = p_carrier WHERE o_w_id = p_w AND o_d_id = v_d AND o_id = v_o;
      UPDATE order_line SET ol_delivery_d = NOW() WHERE ol_w_id = p_w AND ol_d_id = v_d AND ol_o_id = v_o;
      SELECT COALESCE(SUM(ol_amount), 0) INTO v_sum FROM order_line
        WHERE ol_w_id = p_w AND ol_d_id = v_d AND ol_o_id = v_o;
      UPDATE customer SET c_balance = c_balance + v_sum, c_delivery_cnt = c_delivery_cnt + 1
        WHERE c_w_id = p_w AND c_d_id = v_d AND c_id = v_c;
    END IF;
    SET v_d = v_d + 1;
  END WHILE;
  COMMIT;
END"#,
    r#"CREATE PROCEDURE sb_slev(p_w INT, p_d INT, p_threshold INT)
BEGIN
  DECLARE v_next, v_n INT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  SELECT d_next_o_id INTO v_next FROM district WHERE d_w_id = p_w AND d_id = p_d;
  SELECT COUNT(DISTINCT s_i_id) INTO v_n FROM order_line, stock
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id < v_next AND ol_o_id >= v_next - 20
      AND s_w_id = p_w AND s_i_id = ol_i_id AND s_quantity < p_threshold;
  COMMIT;
END"#,
];
