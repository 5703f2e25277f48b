fn main() {
    println!("oc agent-day2: skeleton");
}
